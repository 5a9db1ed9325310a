"""`tools/testcluster cpu`: what each process of a running control plane has cost, as .ci/run prints it."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.realcluster.conftest import TOOL
from tools.testcluster.kubeapi import LocalCluster


def test_every_component_is_counted_and_the_total_is_their_sum(testcluster: LocalCluster) -> None:
    done = subprocess.run([sys.executable, str(TOOL), "cpu", "--dir", str(testcluster.run_dir)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    first, *rows = done.stdout.splitlines()
    total = float(re.fullmatch(rf"testcluster {testcluster.run_dir.name}: ([0-9.]+) CPU s in all", first)[1])
    parsed = [re.fullmatch(r" +([0-9.]+) s  (\S+) \(([0-9.]+) own \+ ([0-9.]+) children\)", row) for row in rows]
    assert all(parsed), rows
    by_name = {m[2]: float(m[1]) for m in parsed if m}
    assert {"kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler"} <= set(by_name), by_name
    assert by_name["kube-apiserver"] > 0  # it has answered every request of this session
    spent = [float(m[1]) for m in parsed if m]
    assert spent == sorted(spent, reverse=True)
    assert abs(sum(spent) - total) <= 0.5 + 0.05 * len(spent)  # each row rounded to 0.1, the total to 1

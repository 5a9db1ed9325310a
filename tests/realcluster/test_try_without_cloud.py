"""The README's "Try the cluster verbs without a cloud" (#31 part 4), run as written.

The section's one block (between the `try-without-cloud` markers) is run line by line, in order, in one
working directory, by bash, with the venv's programs first on PATH (the README's `source .venv/bin/activate`),
each line's wall time printed (the README quotes them). Two lines are not run as written, and why:

- `up`: the tier's cluster stands in for it. `up` prints exactly its run dir's `env` file (KUBECONFIG=,
  STORAGE_EMULATOR_HOST=), which the line exports; the test exports that file of the tier's cluster and
  checks that it has the `v4-8` process pool the line asks for. A second control plane beside the tier's
  would double the load of CI's 2 cores for nothing the section shows.
- `down`: it would stop the tier's cluster, which the tier's conftest stops.

What the section promises is then checked through the same script: Succeeded after one JobSet restart,
and `report` of the run dir showing that recovery.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tools.testcluster.kubeapi import LocalCluster

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- try-without-cloud:begin -->", "<!-- try-without-cloud:end -->"
WORKLOAD, BUCKET_PREFIX = "try-elastic", "try-elastic/"
UP = re.compile(r"tools/testcluster up\b")
DOWN = re.compile(r"tools/testcluster down\b")


def section_span(readme: Path = ROOT / "README.md") -> tuple[int, int]:
    """The 1-based line numbers of the section's markers (test_doc_commands classifies what lies between)."""
    lines = readme.read_text(encoding="utf-8").splitlines()
    return lines.index(BEGIN) + 1, lines.index(END) + 1


def section_commands(readme: Path = ROOT / "README.md") -> list[str]:
    """The block's lines, continuations joined, as bash would read them."""
    text = readme.read_text(encoding="utf-8")
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    body = block.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.strip() for line in re.sub(r"\\\n\s*", "", body).splitlines() if line.strip()]


def test_the_section_is_the_story_it_tells():
    """Build, up with a process pool, create of the bundled trainer on gs://, kill-slice, status, report,
    down: in that order."""
    commands = section_commands()
    order = [r"testcluster build", r"testcluster up --process-pools v4-8:2", r"^elxpk workload create .*--trainer "
             r".*--checkpoint-dir gs://testcluster/", r"^elxpk workload kill-slice", r"^elxpk workload status",
             r"^elxpk report", r"testcluster down"]
    at = [next(i for i, c in enumerate(commands) if re.search(p, c)) for p in order]
    assert at == sorted(at), commands


def _clear_prefix(host: str) -> None:
    """A rerun on the same cluster starts from no checkpoint (the section's path is fixed)."""
    listed = requests.get(f"{host}/storage/v1/b/testcluster/o", params={"prefix": BUCKET_PREFIX}, timeout=30)
    listed.raise_for_status()
    for item in listed.json().get("items", []):
        name = requests.utils.quote(item["name"], safe="")
        requests.delete(f"{host}/storage/v1/b/testcluster/o/{name}", timeout=30)


@pytest.mark.timeout(1800)
def test_the_readme_section_runs_as_written(testcluster: LocalCluster, tmp_path: Path):
    pools = {n["metadata"]["labels"].get("cloud.google.com/gke-tpu-accelerator")
             for n in testcluster.items("/api/v1/nodes", labelSelector="type=virtual-kubelet")}
    assert "tpu-v4-podslice" in pools, f"the tier's cluster has no v4-8 process pool: {pools}"
    cluster_env = dict(line.split("=", 1) for line in
                       (testcluster.run_dir / "env").read_text(encoding="utf-8").splitlines() if "=" in line)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(cluster_env, PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", COLUMNS="200")
    (tmp_path / "tools").symlink_to(ROOT / "tools")  # the section runs from a checkout
    _clear_prefix(cluster_env["STORAGE_EMULATOR_HOST"])
    subprocess.run(["elxpk", "workload", "delete", WORKLOAD, "--yes"], env=env, capture_output=True, timeout=180,
                   check=False)
    timings = []
    try:
        for command in section_commands():
            if UP.search(command) or DOWN.search(command):
                continue
            start = time.monotonic()
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=1500, stdin=subprocess.DEVNULL)
            timings.append((round(time.monotonic() - start, 1), command))
            assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])
        shown = subprocess.run(["elxpk", "workload", "status", WORKLOAD, "-o", "json"], env=env, capture_output=True,
                               text=True, timeout=120, check=True)
        status = json.loads(shown.stdout)
        assert (status["state"], status["restarts"]) == ("Succeeded", 1), status
        reported = subprocess.run(["elxpk", "report", f"gs://testcluster/{WORKLOAD}/ckpt/elxpk-run", "-o", "json"],
                                  cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=120, check=True)
        [recovery] = json.loads(reported.stdout)["recoveries"]
        assert recovery["state_source"] == "checkpoint" and recovery["restored_step"] >= 20, recovery
    finally:
        subprocess.run(["elxpk", "workload", "delete", WORKLOAD, "--yes"], env=env, capture_output=True, timeout=180,
                       check=False)
        load = os.getloadavg()[0]
        print(f"\nREADME 'Try the cluster verbs without a cloud' (load {load:.1f}):")
        for seconds, command in timings:
            print(f"  {seconds:7.1f} s  {command[:100]}")

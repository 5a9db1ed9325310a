"""The two halves of a kill-slice soak's bookkeeping on the test cluster, shared by tests/realcluster/test_soak.py
and bench/bench_soak_real.py: what the Job controller says it created (its own Events, not elxpk's), and
`elxpk workload events --watch --record` started the way a user starts it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from elxpk.cluster.objects.labels import parse_time
from tools.testcluster.kubeapi import JOBSETS, LocalCluster

ELXPK = Path(sys.executable).parent / "elxpk"
EVENTS = "/api/v1/namespaces/default/events"


def pods_created(cluster: LocalCluster, name: str, job: str = "") -> list[str]:
    """Every pod the Job controller made for the JobSet `name` now on the cluster (for its Jobs named `job`
    when given: each restart's Job has the same name). Events outlive their objects by an hour: those of an
    earlier JobSet of the same name on a reused cluster are older than this one."""
    status, jobset = cluster.request("GET", JOBSETS.format(ns="default") + "/" + name)
    assert status == 200, jobset
    since = parse_time(jobset["metadata"]["creationTimestamp"]) or 0.0
    events = cluster.items(EVENTS, fieldSelector="involvedObject.kind=Job,reason=SuccessfulCreate"
                           + (f",involvedObject.name={job}" if job else ""))
    return sorted(e["message"].removeprefix("Created pod: ") for e in events
                  if e["involvedObject"]["name"].startswith(f"{name}-")
                  and (parse_time(e.get("firstTimestamp") or e.get("eventTime")) or 0.0) >= since)


def start_recorder(cluster: LocalCluster, name: str, record: Path) -> subprocess.Popen:
    """`events --watch --record`, once it says it is following (its history read, its pod watch starting):
    a pod gone before the recorder looked is not its miss. Its output goes to RECORD.out and RECORD.err."""
    with open(f"{record}.out", "w") as out, open(f"{record}.err", "w") as err:
        recorder = subprocess.Popen(
            [str(ELXPK), "workload", "events", name, "--watch", "--record", str(record), "--kubeconfig",
             str(cluster.kubeconfig)], stdout=out, stderr=err, text=True)
    try:
        cluster.wait_for("the recorder following", lambda: recorder.poll() is not None or any(
            line.startswith(f"# following {name}") for line in Path(f"{record}.err").read_text().splitlines()))
        assert recorder.poll() is None, Path(f"{record}.err").read_text()
    except BaseException:
        recorder.kill()
        recorder.wait()
        raise
    return recorder

"""`workload kill-slice` where the fake API server is needed: a PodDisruptionBudget's refusal, the exec
WebSocket and an exec whose command fails, the flags that send nothing. The objects it serves
are captured from the real control plane (tests/cluster/captured.py). Soak rounds, their summary and the
Eviction API on the real controllers: tests/realcluster/test_ops_real.py and test_soak.py."""

from __future__ import annotations

import random

import pytest

from elxpk.cli.main import main
from elxpk.cluster.verbs.soak import exit_command, soak
from elxpk.errors import ClusterError
from elxpk.units import format_clock
from tests.cluster.captured import load_captured


def test_eviction_honours_a_pod_disruption_budget(fake, kube, clock):
    objects = load_captured(fake)
    # 8 pods carry the label (2 slices of 4 VMs): none may go
    fake.store.create(("policy", "poddisruptionbudgets"), {
        "metadata": {"name": "keep-workers", "namespace": "default"},
        "spec": {"minAvailable": 8, "selector": {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": "ops"}}}})
    pod, uid = (objects["pods"][0]["metadata"][k] for k in ("name", "uid"))
    with pytest.raises(ClusterError, match="answered 429 .*disruption budget"):
        kube.evict_pod("default", pod, uid=uid)
    assert fake.store.get(("", "pods"), "default", pod) is not None
    summary = soak(kube, "default", "ops", slice_spec="0", mode="evict", repeat=2, every_s=0, exit_code=143,
                   rng=random.Random(0), clock=clock, sleep=clock.sleep, timeout_s=60, poll_s=1)
    assert [r.recovered for r in summary.rounds] == [False, False]  # the soak goes on and says why
    assert summary.rounds[0].error.startswith("not injected: the Kubernetes API at ")
    assert "disruption budget" in summary.rounds[0].error


def test_exit_soak_sends_the_signal_through_exec_to_every_pod_of_the_slice(fake, kube, clock):
    """What `--mode exit` sends: `kill -9 1` by exec to the first container of each pod of the slice. What
    follows is the controllers' (under the restartPolicy Never that elxpk renders, the pod fails and its Job
    replaces it: the delete rounds on the real controllers, tests/realcluster/test_ops_real.py); no
    controller runs here, so the round reports the slice not back."""
    objects = load_captured(fake)
    slice_1 = {p["metadata"]["name"] for p in objects["pods"]
               if p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] == "1"}
    container_name = objects["pods"][0]["spec"]["containers"][0]["name"]
    fake.store.on_exec = lambda namespace, pod, name, command: ("", 0)
    summary = soak(kube, "default", "ops", slice_spec="1", mode="exit", repeat=1, every_s=60, exit_code=137,
                   rng=random.Random(0), clock=clock, sleep=clock.sleep, timeout_s=4, poll_s=2)
    assert [(r.recovered, r.pods, r.error) for r in summary.rounds] == [(False, 4, "not running again within 4s")]
    assert clock.slept == [2, 2]
    assert sorted(e[1] for e in fake.store.execs) == sorted(slice_1)
    assert all(e[2] == container_name and e[3] == exit_command(137) == ["/bin/sh", "-c", "kill -9 1"]
               for e in fake.store.execs)


def test_exec_reports_the_commands_exit_code_over_the_websocket(fake, kube):
    objects = load_captured(fake)
    pod = objects["pods"][0]["metadata"]["name"]
    container_name = objects["pods"][0]["spec"]["containers"][0]["name"]
    fake.store.on_exec = lambda ns, p, c, command: ("out: " + " ".join(command), 3)
    assert kube.exec_in_pod("default", pod, container_name, ["echo", "hi"]) == ("out: echo hi", 3)
    fake.store.on_exec = lambda ns, p, c, command: ("", 0)
    assert kube.exec_in_pod("default", pod, container_name, ["true"]) == ("", 0)
    # The connection ended with the container, before any Status (the official client's returncode raised
    # TypeError on it): no exit code, and no error.
    fake.store.on_exec = lambda ns, p, c, command: ("", None)
    assert kube.exec_in_pod("default", pod, container_name, ["kill", "1"]) == ("", None)


def test_kill_slice_cli_soak_and_bad_flags(fake, capsys, kubeconfig):
    load_captured(fake)
    k = ["--kubeconfig", str(kubeconfig)]
    before = len(fake.calls)
    code = main(["workload", "kill-slice", "ops", "--slice", "two", "--mode", "drain", "--repeat", "0",
                 "--every", "soon", *k])
    _, err = capsys.readouterr()
    assert code == 2
    lines = err.splitlines()
    assert lines[:2] == ["error: --mode 'drain': use one of delete, evict, exit",
                         "error: --repeat 0: must be at least 1 (rounds)"]
    assert lines[2].startswith("error: --every 'soon': ") and "not a number with a unit" in lines[2]
    assert lines[3:] == ["error: --slice 'two': not a whole number; give a whole number, 0 or more (a slice "
                         "index, or random)"]
    code = main(["workload", "kill-slice", "ops", "--slice", "0", "--mode", "exit", "--exit-code", "70", *k])
    _, err = capsys.readouterr()
    assert code == 2 and "--exit-code 70: must be from 129 to 159 (128 + a signal" in err
    assert len(fake.calls) == before
    code = main(["workload", "kill-slice", "ops", "--slice", "random", "--seed", "3", "--mode", "evict",
                 "--yes", *k])
    out, err = capsys.readouterr()
    assert code == 0, err
    index = random.Random(3).randrange(2)
    assert out.strip() == f"slice {index} of ops: 4 pods evicted"


def test_exit_mode_reports_a_failed_exec_in_one_line(fake, capsys, kubeconfig):
    load_captured(fake)
    fake.store.on_exec = lambda ns, pod, container, command: ("sh: kill: not found\n", 127)
    code = main(["workload", "kill-slice", "ops", "--slice", "0", "--mode", "exit", "--exit-code", "137",
                 "--yes", "--kubeconfig", str(kubeconfig)])
    _, err = capsys.readouterr()
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 1 and len(errors) == 1 and "Traceback" not in err
    assert "`kill -9 1` exited 127: sh: kill: not found" in errors[0]


@pytest.mark.parametrize("mode", ["evict", "exit"])
def test_an_evict_or_exit_round_is_timed_to_the_trainers_next_step_and_rewinds_what_it_recorded(
        mode, fake, kube, clock, tmp_path):
    """#52 M4: evict and exit rounds are read as `--mode delete --watch` reads its kill: the recovery is the
    trainer's next step after the kill (9.5 s), not its pods ready (2 s), and the rewind is what the trainer
    recorded at its stop (it heard SIGTERM and saved on the way out: 0 steps), not the steps since its last
    checkpoint (10 here). The controllers' part is the captured objects' (replacements with new uids)."""
    from elxpk.cluster.objects.labels import parse_time
    from elxpk.cluster.verbs.kill_slice import Io, KillRequest, run
    from tests.cluster.captured import KINDS, with_checkpoint_dir
    from trainer.clock import SystemClock
    from trainer.elastic import drain
    from trainer.elastic.progress import ProgressWriter

    objects = with_checkpoint_dir(load_captured(fake), tmp_path)
    fake.store.put(KINDS["jobset"], objects["jobset"])
    fake.store.on_exec = lambda namespace, pod, name, command: ("", None)  # the container ends with the exec
    clock.now = max(parse_time(cs["state"]["running"]["startedAt"]) or 0.0 for p in objects["pods"]
                    for cs in p["status"]["containerStatuses"]) + 1.0
    killed_at = clock()
    running = ProgressWriter(str(tmp_path), SystemClock())
    running.checkpoint(120, killed_at - 30.0)
    running.step_done(130, killed_at - 0.5, 1)  # 10 steps past its checkpoint when the kill comes

    def replaced() -> None:  # the old group's stop on SIGTERM, saved on the way out; the Job's new pods
        running.finish("preempted", "SIGTERM", 77, drain.outcome(130, 130, True, ""))
        for pod in objects["pods"]:  # exited (restartPolicy Never) or evicted: gone, the Job creates new ones
            fake.store.delete(KINDS["pods"], "default", pod["metadata"]["name"])
        load_captured(fake, fresh_uids=True, without=("jobset",))

    def first_step() -> None:  # the restarted trainer's first step
        ProgressWriter(str(tmp_path), SystemClock()).step_done(131, killed_at + 9.5, 1)

    clock.on_sleep += [replaced, lambda: None, first_step]
    lines: list[str] = []
    request = KillRequest("ops", 1, None, mode, 143, 1, 600.0, None, True, 300.0, 2.0)
    assert run(kube, "default", request, Io(out=lines.append, tick=lambda text: None,
                                            confirm=lambda question: None, clock=clock, sleep=clock.sleep))
    # the step's clock time as well, the figure the trainer's records and the alerts give of it (#52)
    assert lines[0] == (f"round 1/1: slice 1 ({mode}, 4 pods) recovered: the trainer's next step 9.5s after the "
                        f"kill at {format_clock(killed_at + 9.5)} (pods ready after 2.0s); 0 steps rewound")
    assert lines[2] == "recovery time (kill -> the trainer's next step): p50 9.5s, p95 9.5s; pods ready: p50 2.0s, p95 2.0s"
    assert lines[3] == "steps rewound: 0 (as the trainer recorded each stop)"


def test_a_round_whose_trainer_record_cannot_be_read_says_so_rather_than_time_pods_as_the_recovery(
        fake, kube, clock, tmp_path):
    """No progress record in the workload's checkpoint directory before the kill (a program that writes
    none): the round is back when its pods are, and says the trainer's next step is unknown and why, at
    once rather than after waiting out its timeout for a record that was never there."""
    from elxpk.cluster.objects.labels import parse_time
    from elxpk.cluster.verbs.kill_slice import Io, KillRequest, run
    from tests.cluster.captured import KINDS, with_checkpoint_dir

    objects = with_checkpoint_dir(load_captured(fake), tmp_path)
    fake.store.put(KINDS["jobset"], objects["jobset"])
    clock.now = max(parse_time(cs["state"]["running"]["startedAt"]) or 0.0 for p in objects["pods"]
                    for cs in p["status"]["containerStatuses"]) + 1.0

    def replaced() -> None:
        load_captured(fake, fresh_uids=True, without=("jobset",))

    clock.on_sleep += [replaced]
    lines: list[str] = []
    request = KillRequest("ops", 1, None, "evict", 143, 1, 600.0, None, True, 300.0, 2.0)
    assert run(kube, "default", request, Io(out=lines.append, tick=lambda text: None,
                                            confirm=lambda question: None, clock=clock, sleep=clock.sleep))
    assert lines[0] == (f"round 1/1: slice 1 (evict, 4 pods) back: pods ready after 2.0s; the trainer's next step "
                        f"unknown (no elxpk-progress.json in {tmp_path} yet (the trainer writes it after its first step))")
    assert clock.slept == [2.0]
    assert lines[2] == "recovery time (kill -> the trainer's next step): p50 -, p95 -; pods ready: p50 2.0s, p95 2.0s"
    assert lines[3] == "steps rewound: unknown (the trainer recorded no rewind at any stop)"

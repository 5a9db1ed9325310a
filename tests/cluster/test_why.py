"""why.py on objects captured from the real control plane (tests/cluster/why_corpus/, written by
tests/realcluster/test_why_real.py with ELXPK_WHY_CAPTURE=DIR): every stuck cause, with and without what
`--why` fetches besides, and the one line plain `status` shows past the threshold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elxpk.cluster.diagnosis.why import Context, explain, state_since, stuck_line
from elxpk.cluster.records.status import compute_status, parse_time
from elxpk.cluster.verbs.observe import fetch_status
from tests.cluster.captured import load_captured

CORPUS = Path(__file__).parent / "why_corpus"
# case -> (cause of the first reason, words it must carry, words its fix must carry)
EXPECTED = {
    "quota": ("quota", ["google.com/tpu quota in flavor default-flavor", "asks 8", "why-small has at most 4"],
              ["--num-slices", "--queue"]),
    "no_node_pool": ("no-node-pool", ["tpu-v6e-slice", "2x2", "node pools with tpu-v6e-slice: 4x4"],
                     ["`--tpu-type v6e-4` needs a node pool of ct6e-standard-4t with --tpu-topology 2x2"]),
    "insufficient_tpu": ("insufficient-tpu", ["too few free google.com/tpu", "4 chips asked"], ["--num-slices"]),
    "taint": ("taint", ["why.elxpk.dev/maintenance=true:NoSchedule"], ["remove the taint why.elxpk.dev/maintenance from the nodes labelled"]),
    "image_pull": ("image-pull", ["registry.testcluster.invalid/no-such-image:1", "ImagePullBackOff"],
                   ["--docker-image"]),
    "crash_loop": ("crash-loop", ["2 pods", "CrashLoopBackOff", "exit 70 user_error: not retryable"],
                   ["elxpk workload logs why-crash --slice 0 --vm ", " --previous"]),
    "admission_check_inactive": ("admission-check", ["ClusterQueue why-checked is inactive",
                                                     "inactive AdmissionCheck(s): why-never-decided"],
                                 ["AdmissionCheck why-never-decided"]),
    "admission_check_pending": ("admission-check", ["reserved quota in ClusterQueue why-checked",
                                                    "why-never-decided Pending"], ["AdmissionCheck why-never-decided"]),
    "suspended": ("suspended", ["spec.suspend: true", "no Kueue queue label"], ["spec.suspend to false on JobSet why-suspended"]),
    # beyond the 8 stuck causes
    "host_ports": ("host-ports", ["2 node(s) with gke-tpu-accelerator tpu-v5p-slice, gke-tpu-topology 2x2x1 are "
                                  "taken"], ["elxpk workload list"]),
    # #43: the workload's own 6 slices on the 2 nodes of their shape, no other workload present
    "too_few_nodes": ("too-few-nodes", ["not enough nodes of this type for the slices: 2 node(s) with "
                                        "gke-tpu-accelerator tpu-v5p-slice", "asks for 6 pods",
                                        "its own pods hold the 2 taken, no other workload's do"], ["--num-slices"]),
    "preempted": ("evicted", ["Kueue preempted the workload (InClusterQueue)"], ["--priority"]),
    # #33: the Job controller's side (tests/realcluster/test_why_jobs_real.py)
    "failed_create": ("pod-create", ["cannot create the pods of Job why-sa-slice-job-0",
                                     "service account xpk-sa does not exist"],
                      ["create ServiceAccount xpk-sa in namespace why-sa"]),
    "backoff": ("backoff", ["Job why-backoff-worker-1 (replicatedJob worker, slice 1)", "pod-failure back-off",
                            "3 failed pods since its last success", "waits 40s", "next try in about"],
                ["10 s, 20 s, 40 s ... up to 10 min", "`elxpk workload events why-backoff`"]),
    "job_failed": ("job-failed", ["Job why-failed-slice-job-0 of replicatedJob slice-job (PodFailurePolicy)",
                                  "exit 70 user_error"], ["`elxpk workload logs why-failed --slice 0 --vm 0`"]),
}


def load(case: str) -> dict:
    return dict(json.loads((CORPUS / f"{case}.json").read_text()))


def context_of(objects: dict) -> Context:
    nodes = tuple({"name": n["metadata"].get("name"), "labels": n["metadata"]["labels"], "taints": n["spec"].get("taints")}
                  for n in objects["nodes"])
    return Context(cluster_queue=objects["cluster_queue"], local_queue=objects["local_queue"], nodes=nodes,
                   events=tuple(objects.get("events") or ()))


def captured_at(objects: dict) -> float:
    """The newest time the objects carry: `now` as it was when they were captured, near enough."""
    times = [parse_time(c.get("lastTransitionTime")) for key in ("pods", "jobs", "workloads")
             for obj in objects[key] for c in (obj.get("status") or {}).get("conditions") or []]
    times.append(parse_time(objects["jobset"]["metadata"]["creationTimestamp"]))
    return max(t for t in times if t is not None)


def test_corpus_holds_every_case() -> None:
    assert sorted(p.stem for p in CORPUS.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_each_cause_named_with_its_fix(case: str) -> None:
    objects = load(case)
    cause, words, fix_words = EXPECTED[case]
    reasons = explain(objects["jobset"], objects["jobs"], objects["pods"], objects["workloads"],
                      captured_at(objects), context_of(objects))
    assert reasons and reasons[0].cause == cause, reasons
    # One reason each (the scheduler's sentences about preemption are no node reasons), but a preempted
    # workload also waits for quota again.
    assert [r.cause for r in reasons[1:]] == (["quota"] if case == "preempted" else []), reasons
    for word in words:
        assert word in reasons[0].text, (word, reasons[0])
    for word in fix_words:
        assert word in reasons[0].fix, (word, reasons[0])


@pytest.mark.parametrize("case", sorted(set(EXPECTED) - {"failed_create"}))  # its cause is in Events only
def test_plain_status_objects_alone_name_the_cause(case: str) -> None:
    """Without what --why fetches besides (no ClusterQueue, no nodes), the cause is still named."""
    objects = load(case)
    reasons = explain(objects["jobset"], objects["jobs"], objects["pods"], objects["workloads"],
                      captured_at(objects))
    assert reasons and reasons[0].cause == EXPECTED[case][0], reasons


@pytest.mark.parametrize("case", ["quota", "image_pull", "crash_loop", "admission_check_pending"])
def test_one_line_only_past_the_threshold(case: str) -> None:
    objects = load(case)
    args = objects["jobset"], objects["jobs"], objects["pods"], objects["workloads"]
    now = captured_at(objects)
    status = compute_status(*args, now)
    assert status.state in ("Queued", "Admitted", "Restarting"), status.state
    since = state_since(objects["jobset"], objects["jobs"], objects["workloads"])
    assert since is not None and since <= now
    reasons = explain(*args, now)
    assert stuck_line(status.state, now - since, reasons, after_s=now - since + 1) == ""
    line = stuck_line(status.state, now - since + 1, reasons, after_s=now - since + 1)
    assert line == reasons[0].text and "\n" not in line


def test_nodes_held_partly_by_another_workload_name_the_split() -> None:
    """The captured 6 slices on 2 nodes, with one of its running pods taken for another workload's (it is
    not this workload's any more): one node is its own, the other another workload's, and the words say
    so, with and without the node list (the `stuck` alert reads the objects alone)."""
    objects = load("too_few_nodes")
    running = [p for p in objects["pods"] if p["status"].get("phase") == "Running"]
    objects["pods"] = [p for p in objects["pods"] if p is not running[0]]
    for context in (context_of(objects), None):
        reasons = explain(objects["jobset"], objects["jobs"], objects["pods"], objects["workloads"],
                          captured_at(objects), context)
        assert reasons[0].cause == "host-ports", reasons
        assert "2 node(s) with gke-tpu-accelerator tpu-v5p-slice, gke-tpu-topology 2x2x1 are taken: 1 held by " \
               "another workload's pods, 1 by this workload's own" in reasons[0].text, reasons[0]


def test_the_stuck_alert_says_too_few_nodes_as_why_does() -> None:
    """The `stuck` alert of the captured 6-slices-on-2-nodes workload carries --why's words, not "another
    workload's pods" (its watch reads the objects alone, as plain status does)."""
    from elxpk.notify.flags import NotifySettings
    from elxpk.notify.watch import NotifyingWatch
    from tests.support.webhook_server import webhook

    objects = load("too_few_nodes")
    with webhook(["200"]) as hook:
        settings = NotifySettings(hook.url, "json", None, frozenset({"stuck"}), stuck_after_s=60.0,
                                  recovery_within_s=None)
        watch = NotifyingWatch(settings, objects["jobset"]["metadata"]["name"], "default", print,
                               clock=lambda: captured_at(objects) + 3600)
        watch.objects(objects["jobset"], objects["jobs"], objects["pods"], objects["workloads"])
        assert watch.close() == 0
    (body,) = [json.loads(b) for _, b in hook.bodies]
    assert body["kind"] == "stuck" and "not enough nodes of this type for the slices: 2 node(s)" in body["summary"]
    assert "another workload" not in body["summary"], body


def test_running_workload_has_no_line() -> None:
    objects = load("crash_loop")
    assert stuck_line("Running", 1e6, [], 0) == ""
    reasons = explain(objects["jobset"], objects["jobs"], objects["pods"], objects["workloads"], 0)
    assert stuck_line("Running", 1e6, reasons, 0) == ""


@given(st.text(max_size=300))
def test_any_scheduler_message_gives_a_reason_never_an_error(message: str) -> None:
    objects = load("no_node_pool")
    pod = json.loads(json.dumps(objects["pods"][0]))
    for c in pod["status"]["conditions"]:
        if c["type"] == "PodScheduled":
            c["message"] = message
    reasons = explain(objects["jobset"], objects["jobs"], [pod], objects["workloads"], 0, context_of(objects))
    assert reasons and all(r.text for r in reasons)


@given(st.text(max_size=300))
def test_any_kueue_message_gives_a_reason_never_an_error(message: str) -> None:
    objects = load("quota")
    workload = json.loads(json.dumps(objects["workloads"][0]))
    workload["status"]["conditions"][0]["message"] = message
    reasons = explain(objects["jobset"], objects["jobs"], objects["pods"], [workload], 0, context_of(objects))
    assert reasons and reasons[0].cause in ("quota", "queue-inactive", "admission-check", "queued")


def test_plain_status_makes_no_extra_call_and_why_few(fake, kube) -> None:
    """The calls as the fake records them, on the objects of the quota case as the real Kueue left them."""
    objects = load_captured(fake, "quota", "why_corpus")
    ns, name, now = "why-quota", "why-quota", captured_at(objects) + 600
    kube.kueue_version()
    before = len(fake.calls)
    plain = fetch_status(kube, ns, name, now=now, stuck_after_s=60)
    # what status always reads (the JobSet, its Jobs, its Failed pods, its Kueue Workload), and, stuck past the
    # threshold, its pods in full once: the reasons are in the pods that have not failed
    assert len(fake.calls) - before == 5
    assert plain.state == "Queued" and plain.reason.startswith(
        "Kueue: not enough google.com/tpu quota in flavor default-flavor: asks 8"), plain.reason
    before = len(fake.calls)
    why = fetch_status(kube, ns, name, now=now, why=True)
    assert 4 < len(fake.calls) - before <= 9  # + LocalQueue, ClusterQueue, visibility discovery: none per pod
    assert why.why and why.why[0].cause == "quota", why.why  # as test_each_cause_named_with_its_fix has it


def test_cli_why_table_and_a_bad_threshold(fake, capsys, k, monkeypatch) -> None:
    from tests.cluster.conftest import run_cli

    monkeypatch.setenv("COLUMNS", "200")
    load_captured(fake, "quota", "why_corpus")
    code, out, err = run_cli(capsys, "workload", "status", "why-quota", "-n", "why-quota", "--why", "--stuck-after",
                             "0s", *k)
    assert code == 0, err
    quota = "Kueue: not enough google.com/tpu quota in flavor default-flavor: asks 8"
    assert f"Why              {quota}" in out and "(--why: the fix)" in out
    assert f"\nWhy\n- [quota] {quota}" in out
    before = len(fake.calls)
    code, _, err = run_cli(capsys, "workload", "status", "why-quota", "-n", "why-quota", "--stuck-after", "soon", *k)
    assert code == 2 and "--stuck-after 'soon'" in err and len(fake.calls) == before  # nothing asked of the cluster


# Numbers in cluster messages are ASCII digits, at most 19 (#29 class 3): another script's digits, or a
# number longer than int() reads (4,300 digits), give a reason, never an error.
HOSTILE_NUMBERS = st.sampled_from(["٣", "３", "²", "1" * 5000, "9" * 20, "0"]) | st.integers(0, 10**30).map(str)


@given(HOSTILE_NUMBERS, HOSTILE_NUMBERS)
def test_hostile_numbers_in_scheduler_and_kueue_messages(a: str, b: str) -> None:
    objects = load("no_node_pool")
    pod = json.loads(json.dumps(objects["pods"][0]))
    for c in pod["status"]["conditions"]:
        if c["type"] == "PodScheduled":
            c["message"] = f"0/{a} nodes are available: {b} node(s) didn't match Pod's node affinity/selector, {a} x."
    assert explain(objects["jobset"], objects["jobs"], [pod], objects["workloads"], 0, context_of(objects))
    objects = load("quota")
    workload = json.loads(json.dumps(objects["workloads"][0]))
    workload["status"]["conditions"][0]["message"] = (
        f"couldn't assign flavors to pod set worker: insufficient quota for google.com/tpu in flavor default-flavor, "
        f"requests ({a}) + current podset request ({b}) > maximum capacity ({a}); {b} more needed")
    assert explain(objects["jobset"], objects["jobs"], objects["pods"], [workload], 0, context_of(objects))


@given(HOSTILE_NUMBERS)
def test_hostile_exit_code_in_a_failed_job(code: str) -> None:
    objects = load("job_failed")
    jobs = json.loads(json.dumps(objects["jobs"]))
    for job in jobs:
        for c in (job.get("status") or {}).get("conditions") or []:
            c["message"] = f"Container main for pod x failed with exit code {code} matching FailJob rule"
    reasons = explain(objects["jobset"], jobs, objects["pods"], objects["workloads"], 0, context_of(objects))
    assert reasons and all(r.text for r in reasons)

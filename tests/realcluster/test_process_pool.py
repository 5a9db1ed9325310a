"""The process pools of tools/testcluster (`up --process-pools`, virtual-kubelet v1.14.1 with the provider of
tools/testcluster/vk/): nodes whose pods really run, as processes on this machine.

Each test is one small pod on such a node (the shared cluster's default `v4-8:2` pool, a TPU type no kwok
pool has), read back through the real API server: the exit code as `state.terminated`, the output through
the kubelet log API, the env with its downward-API fieldRefs and the TPU VM's own env, deletion as a kubelet
does it, init containers and native sidecars in their order, the placeholder for an unknown image."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest

from elxpk.cluster.access.connect import connect
from elxpk.cluster.access.target import ClusterTarget
from elxpk.errors import ClusterError
from tests.realcluster.test_submit_goldens import elxpk
from tools.testcluster.kubeapi import JOBSETS, PODS, LocalCluster

POOL = {"cloud.google.com/gke-tpu-accelerator": "tpu-v4-podslice", "cloud.google.com/gke-tpu-topology": "2x2x1"}
# An image whose repository ends in elxpk-trainer runs its command from this checkout; any other is a placeholder.
TRAINER_IMAGE = "registry.testcluster.invalid/team/elxpk-trainer:test"
NS = "default"


@pytest.fixture(scope="module")
def cluster(testcluster: LocalCluster) -> LocalCluster:
    nodes = testcluster.items("/api/v1/nodes", labelSelector="type=virtual-kubelet")
    if not nodes:
        pytest.fail("the test cluster has no process pool: start it with `tools/testcluster up` "
                    "(its default --process-pools is v4-8:2)", pytrace=False)
    return testcluster


def pod_manifest(name: str, containers: list[dict], **spec: Any) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": "process-pool-test"},
                         "annotations": {"testcluster.elxpk.dev/note": "hello"}},
            "spec": {"restartPolicy": "Never", "nodeSelector": POOL,
                     "tolerations": [{"key": "google.com/tpu", "operator": "Exists"}],
                     "terminationGracePeriodSeconds": 2, "containers": containers, **spec}}


def bash(name: str, script: str, *, chips: int = 4, **extra: Any) -> dict:
    """A container running `bash -c script` from the trainer image; `chips` of the VM's 4 (0 for an init
    container or a sidecar: theirs would add to the pod's request)."""
    limits = {"resources": {"limits": {"google.com/tpu": str(chips)}}} if chips else {}
    return {"name": name, "image": TRAINER_IMAGE, "command": ["bash", "-c", script], **limits, **extra}


def create(cluster: LocalCluster, manifest: dict) -> str:
    name = f"{manifest['metadata']['name']}-{uuid.uuid4().hex[:6]}"
    manifest["metadata"]["name"] = name
    status, body = cluster.request("POST", PODS.format(ns=NS), manifest)
    assert status == 201, body
    return name


def get(cluster: LocalCluster, name: str) -> dict:
    status, body = cluster.request("GET", PODS.format(ns=NS) + "/" + name)
    assert status == 200, body
    return body


def finished(cluster: LocalCluster, name: str, timeout: float = 60) -> dict:
    return dict(cluster.wait_for(f"pod {name} Succeeded or Failed", lambda: (
        pod if (pod := get(cluster, name))["status"].get("phase") in ("Succeeded", "Failed") else None),
        timeout=timeout))


def log(cluster: LocalCluster, name: str, container: str, *, check: bool = True, **query: str) -> str:
    """The container's log through the API server, which proxies the node's kubelet API (virtual-kubelet);
    with check=False, "" while there is none yet (the pod not yet started on its node)."""
    serialized = cluster.client.param_serialize(
        "GET", PODS.format(ns=NS) + f"/{name}/log", query_params=[("container", container), *query.items()],
        auth_settings=["BearerToken"])
    response = cluster.client.call_api(*serialized, _request_timeout=30)
    body = response.read()
    if response.status != 200 and not check:
        return ""
    assert response.status == 200, body
    return str(body.decode())


def remove(cluster: LocalCluster, name: str) -> None:
    cluster.request("DELETE", PODS.format(ns=NS) + "/" + name, {"gracePeriodSeconds": 0})


def terminated(pod: dict, container: str, key: str = "containerStatuses") -> dict:
    [status] = [s for s in pod["status"][key] if s["name"] == container]
    return dict(status["state"]["terminated"])


def test_exit_code_and_output_come_back(cluster: LocalCluster) -> None:
    """`bash -c 'echo hi; exit 3'` as the pod spec says: the pod Fails with the container's exit code 3 and
    reason Error, and its output comes through the API server's log endpoint."""
    name = create(cluster, pod_manifest("pp-exit", [bash("main", "echo hi; echo oops >&2; exit 3")]))
    pod = finished(cluster, name)
    assert pod["status"]["phase"] == "Failed"
    state = terminated(pod, "main")
    assert (state["exitCode"], state["reason"]) == (3, "Error")
    assert log(cluster, name, "main").splitlines() == ["hi", "oops"]
    assert log(cluster, name, "main", tailLines="1").splitlines() == ["oops"]
    remove(cluster, name)


def test_env_field_refs_and_the_tpu_vm_env_arrive(cluster: LocalCluster) -> None:
    """The pod's env reaches the process: plain values with $(VAR) expanded, downward-API fieldRefs (name,
    namespace, a label, an annotation, status.podIP, spec.nodeName), the TPU VM's env from the provider's
    table (a v4-8 VM: worker 0 of 1, 4 chips as CPU devices), and the emulator's address for gs://."""
    refs = {"POD_NAME": "metadata.name", "POD_NS": "metadata.namespace", "APP": "metadata.labels['app']",
            "NOTE": "metadata.annotations['testcluster.elxpk.dev/note']", "POD_IP": "status.podIP",
            "NODE": "spec.nodeName"}
    env = [{"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in refs.items()]
    env += [{"name": "GREETING", "value": "hi from $(POD_NAME) $$(NOT_EXPANDED) $(UNDEFINED)"}]
    script = "python -c 'import json, os; print(json.dumps(dict(os.environ)))'"
    name = create(cluster, pod_manifest("pp-env", [bash("main", script, env=env)],
                                        hostname="worker-0", subdomain="pp"))
    pod = finished(cluster, name)
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    seen = json.loads(log(cluster, name, "main"))
    assert {k: seen[k] for k in refs} == {"POD_NAME": name, "POD_NS": NS, "APP": "process-pool-test",
                                          "NOTE": "hello", "POD_IP": pod["status"]["podIP"],
                                          "NODE": pod["spec"]["nodeName"]}
    assert seen["GREETING"] == f"hi from {name} $(NOT_EXPANDED) $(UNDEFINED)"
    assert pod["status"]["podIP"].startswith("127.") and pod["status"]["podIP"] != pod["status"]["hostIP"]
    assert {k: seen[k] for k in ("TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES", "TPU_ACCELERATOR_TYPE", "TPU_TOPOLOGY",
                                 "TPU_SKIP_MDS_QUERY", "XLA_FLAGS", "JAX_PLATFORMS")} == {
        "TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "worker-0.pp", "TPU_ACCELERATOR_TYPE": "v4-8",
        "TPU_TOPOLOGY": "2x2x1", "TPU_SKIP_MDS_QUERY": "true",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"}
    assert seen["STORAGE_EMULATOR_HOST"] == cluster.storage_emulator_host
    remove(cluster, name)


def test_a_job_pod_gets_its_completion_index_and_its_name_resolves(cluster: LocalCluster) -> None:
    """An Indexed Job's pod: the Job controller's completion-index annotation arrives as TPU_WORKER_ID and as
    a fieldRef; inside, `hostname` is the pod's, and <hostname>.<subdomain> resolves to the pod's address."""
    job_name = f"pp-job-{uuid.uuid4().hex[:6]}"
    script = ('echo "index=$IDX worker=$TPU_WORKER_ID host=$(hostname)"; '
              'getent hosts "$(hostname).pp-sub" | cut -d" " -f1')
    template = pod_manifest("unused", [bash("main", script, env=[{"name": "IDX", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}])],
        subdomain="pp-sub")
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job_name, "namespace": NS},
           "spec": {"completionMode": "Indexed", "completions": 1, "parallelism": 1, "backoffLimit": 0,
                    "template": {"metadata": {"labels": {"app": "process-pool-test"}}, "spec": template["spec"]}}}
    status, body = cluster.request("POST", f"/apis/batch/v1/namespaces/{NS}/jobs", job)
    assert status == 201, body
    [pod] = cluster.wait_for("the Job's pod", lambda: cluster.items(PODS.format(ns=NS),
                                                                     labelSelector=f"job-name={job_name}"))
    pod = finished(cluster, pod["metadata"]["name"])
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    lines = log(cluster, pod["metadata"]["name"], "main").splitlines()
    # The Job controller sets the pod's hostname to <job>-<index> when a subdomain is given.
    assert lines == [f"index=0 worker=0 host={job_name}-0", pod["status"]["podIP"]]
    cluster.request("DELETE", f"/apis/batch/v1/namespaces/{NS}/jobs/{job_name}", {"propagationPolicy": "Background"})


def test_deletion_sends_sigterm_then_sigkill_after_the_grace_period(cluster: LocalCluster) -> None:
    """A pod deleted with a 3 s grace period: its process gets SIGTERM (it traps it and carries on), then
    SIGKILL once the grace period is over; the pod's last status says 137. A finalizer of the test keeps the
    pod object readable after virtual-kubelet has finished with it."""
    script = "trap 'echo got TERM' TERM; echo started; while true; do sleep 0.1; done"
    manifest = pod_manifest("pp-kill", [bash("main", script)])
    manifest["metadata"]["finalizers"] = ["testcluster.elxpk.dev/keep"]
    name = create(cluster, manifest)
    try:
        cluster.wait_for("the process started", lambda: "started" in log(cluster, name, "main", check=False))
        status, body = cluster.request("DELETE", PODS.format(ns=NS) + "/" + name, {"gracePeriodSeconds": 3})
        assert status == 200, body
        pod = cluster.wait_for("the container killed", lambda: (
            p if (p := get(cluster, name))["status"].get("containerStatuses", [{}])[0].get("state", {}).get(
                "terminated") else None), timeout=60)
        state = terminated(pod, "main")
        assert (state["exitCode"], pod["status"]["phase"]) == (137, "Failed")
        # deletionTimestamp is the time of the delete plus the grace period: SIGKILL came no earlier (1 s: the
        # resolution of both timestamps).
        assert when(state["finishedAt"]) >= when(pod["metadata"]["deletionTimestamp"]) - timedelta(seconds=1)
        assert "got TERM" in (cluster.run_dir / "vk").joinpath(
            "pods", f"{NS}_{name}_{pod['metadata']['uid']}", "main.log").read_text()
    finally:
        cluster.request("PATCH", PODS.format(ns=NS) + "/" + name, {"metadata": {"finalizers": None}},
                        content_type="application/merge-patch+json")
        remove(cluster, name)


def test_a_deleted_pod_is_removed_once_its_process_ends_not_a_grace_period_later(cluster: LocalCluster) -> None:
    """A pod deleted with a 600 s grace period whose process ends at SIGTERM: as a kubelet's status manager
    does, the node writes the terminal status (143) and then deletes the object with grace period 0 (this
    pod's UID only), at once, not 600 s later, which is what virtual-kubelet alone does (every JobSet
    restart that deleted a running pod waited that long for the old Jobs to go). The test's finalizer keeps
    the object readable, so the node's deletion shows as deletionGracePeriodSeconds 0."""
    manifest = pod_manifest("pp-gone", [bash("main", "echo started; exec sleep 1000")],
                            terminationGracePeriodSeconds=600)
    manifest["metadata"]["finalizers"] = ["testcluster.elxpk.dev/keep"]
    name = create(cluster, manifest)
    try:
        cluster.wait_for("the process started", lambda: "started" in log(cluster, name, "main", check=False))
        status, body = cluster.request("DELETE", PODS.format(ns=NS) + "/" + name, {})
        assert status == 200, body
        assert body["metadata"]["deletionGracePeriodSeconds"] == 600, body["metadata"]
        pod = cluster.wait_for("the node's own deletion (grace period 0)", lambda: (
            p if (p := get(cluster, name))["metadata"].get("deletionGracePeriodSeconds") == 0 else None),
            timeout=60)
        assert (pod["status"]["phase"], terminated(pod, "main")["exitCode"]) == ("Failed", 143)
    finally:
        cluster.request("PATCH", PODS.format(ns=NS) + "/" + name, {"metadata": {"finalizers": None}},
                        content_type="application/merge-patch+json")
        remove(cluster, name)


def test_an_eviction_ends_the_process_and_keeps_the_disruption_condition(cluster: LocalCluster) -> None:
    """The eviction API (what `kill-slice --mode evict` calls): the process gets SIGTERM and ends (143), and
    the pod's last status keeps the API server's DisruptionTarget condition, which the Job controller's
    podFailurePolicy reads (the provider writes the status whole, so it must carry other writers' conditions)."""
    manifest = pod_manifest("pp-evict", [bash("main", "echo started; exec sleep 1000")])
    manifest["metadata"]["finalizers"] = ["testcluster.elxpk.dev/keep"]
    name = create(cluster, manifest)
    try:
        cluster.wait_for("the process started", lambda: "started" in log(cluster, name, "main", check=False))
        status, body = cluster.request("POST", PODS.format(ns=NS) + f"/{name}/eviction", {
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}})
        assert status == 201, body
        pod = cluster.wait_for("the container ended", lambda: (
            p if (p := get(cluster, name))["status"].get("phase") == "Failed" else None), timeout=60)
        assert terminated(pod, "main")["exitCode"] == 143
        conditions = {c["type"]: c for c in pod["status"]["conditions"]}
        assert conditions["DisruptionTarget"]["status"] == "True", conditions
        assert conditions["DisruptionTarget"]["reason"] == "EvictionByEvictionAPI"
    finally:
        cluster.request("PATCH", PODS.format(ns=NS) + "/" + name, {"metadata": {"finalizers": None}},
                        content_type="application/merge-patch+json")
        remove(cluster, name)


def test_a_pod_deleted_as_soon_as_it_is_created_is_still_killed(cluster: LocalCluster) -> None:
    """Deleted before its first Running status reaches the API server, virtual-kubelet force-deletes the pod
    without telling the provider. Either it never reached the provider (then no process ever started, as a
    kubelet would not start it), or it did, and then the provider sees the mark itself, kills the process
    and writes how it ended."""
    manifest = pod_manifest("pp-early", [bash("main", "exec sleep 1000")])
    manifest["metadata"]["finalizers"] = ["testcluster.elxpk.dev/keep"]
    name = create(cluster, manifest)
    try:
        status, body = cluster.request("DELETE", PODS.format(ns=NS) + "/" + name, {"gracePeriodSeconds": 1})
        assert status == 200, body
        started = lambda pod: any((cluster.run_dir / "vk" / "pods").glob(  # noqa: E731
            f"{NS}_{name}_{pod['metadata']['uid']}"))
        pod = cluster.wait_for("the process ended, or never started", lambda: (
            p if (p := get(cluster, name))["status"].get("phase") == "Failed" or (
                p["metadata"].get("deletionGracePeriodSeconds") == 0 and not started(p)) else None), timeout=60)
        if started(pod):
            assert terminated(pod, "main")["exitCode"] in (137, 143)
    finally:
        cluster.request("PATCH", PODS.format(ns=NS) + "/" + name, {"metadata": {"finalizers": None}},
                        content_type="application/merge-patch+json")
        remove(cluster, name)


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_init_containers_run_first_and_a_native_sidecar_keeps_running(cluster: LocalCluster) -> None:
    """Init containers in order, then the main container; a native sidecar (restartPolicy Always) is started
    in its place and runs beside the main container, which sees it; it is stopped when the main one ends."""
    # A sidecar only has to have started before the next init container does (no startupProbe here), so it
    # does not write to `order`: whether its first line comes before `second` is not defined. Each container
    # has a PID namespace of its own (as without shareProcessNamespace), so main sees the sidecar's
    # heartbeat in the shared work dir, not its process.
    inits = [bash("first", "echo first >> order", chips=0),
             bash("sidecar", "echo up; while true; do date +%s%N > beat; sleep 0.1; done", chips=0,
                  restartPolicy="Always"),
             bash("second", "echo second >> order", chips=0)]
    main = bash("main", "for i in $(seq 100); do [ -s beat ] && break; sleep 0.1; done; echo main >> order; "
                       'cat order; a=$(cat beat); sleep 0.5; [ "$(cat beat)" != "$a" ] && echo sidecar-alive')
    name = create(cluster, pod_manifest("pp-init", [main], initContainers=inits))
    pod = finished(cluster, name)
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    assert log(cluster, name, "main").splitlines() == ["first", "second", "main", "sidecar-alive"]
    assert log(cluster, name, "sidecar").splitlines() == ["up"]
    assert [terminated(pod, c, "initContainerStatuses")["exitCode"] for c in ("first", "second")] == [0, 0]
    assert terminated(pod, "sidecar", "initContainerStatuses")["exitCode"] in (137, 143)
    remove(cluster, name)


def test_an_unknown_image_is_a_placeholder_and_the_pod_says_so(cluster: LocalCluster) -> None:
    """Any image but elxpk-trainer runs as a placeholder that stays alive until it is killed, with an Event."""
    name = create(cluster, pod_manifest("pp-placeholder", [{"name": "server", "image": "us-docker.pkg.dev/x/server:1",
                                                            "args": ["--port", "29001"]}]))
    cluster.wait_for("Running", lambda: get(cluster, name)["status"].get("phase") == "Running")
    events = cluster.wait_for("the Placeholder event", lambda: cluster.items(
        f"/api/v1/namespaces/{NS}/events", fieldSelector=f"involvedObject.name={name},reason=Placeholder"))
    assert "us-docker.pkg.dev/x/server:1" in events[0]["message"]
    assert get(cluster, name)["status"]["phase"] == "Running"
    remove(cluster, name)


def test_workload_logs_reads_a_process_pool_container(cluster: LocalCluster) -> None:
    """`elxpk workload logs` (the console script) on a workload elxpk rendered, unchanged, for the process
    pool: the rendered command wrapper runs for real and the user's command's output comes back."""
    name = f"pp-logs-{uuid.uuid4().hex[:4]}"
    created = elxpk("workload", "create", f"--workload={name}", "--tpu-type=v4-8", "--num-slices=1",
                    "--no-pathways", f"--docker-image={TRAINER_IMAGE}", "--command", "echo hi; exit 3",
                    cluster=cluster)
    assert created.returncode == 0, created.stderr
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    cluster.wait_for("the pod failed with 3", lambda: any(
        s.get("state", {}).get("terminated", {}).get("exitCode") == 3
        for p in cluster.items(PODS.format(ns=NS), labelSelector=selector)
        for s in p["status"].get("containerStatuses", [])), timeout=120)
    shown = elxpk("workload", "logs", name, cluster=cluster)
    assert shown.returncode == 0, shown.stderr
    assert "hi" in shown.stdout.splitlines()
    assert "EXIT_CODE=3" in shown.stdout  # the rendered wrapper's own last line
    assert elxpk("workload", "delete", name, "--yes", cluster=cluster).returncode == 0


def test_kill_slice_delete_forces_and_workload_delete_waits_for_the_children(cluster: LocalCluster) -> None:
    """What `kill-slice --mode delete` and `workload delete` ask for reaches the API server: DeleteOptions go in
    the body, beside the uid precondition, because the API server reads no query of a DELETE that has a body.
    (Both were in the query: the kill was a graceful delete, whose SIGTERM-deaf process lived the pod's whole
    grace period, and the Foreground delete a background one, the JobSet gone while its pods still ran.) The
    workload's processes ignore SIGTERM, so only the grace periods end them."""
    name = f"pp-del-{uuid.uuid4().hex[:4]}"
    created = elxpk("workload", "create", f"--workload={name}", "--tpu-type=v4-8", "--num-slices=2", "--no-pathways",
                    f"--docker-image={TRAINER_IMAGE}", "--max-restarts=3", "--termination-grace-period-seconds=10",
                    "--command", "trap '' TERM; echo started; while true; do sleep 0.2; done", cluster=cluster)
    assert created.returncode == 0, created.stderr
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"

    def running(attempt: str) -> list[dict]:
        found = [p for p in cluster.items(PODS.format(ns=NS), labelSelector=selector)
                 if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
                 and p["metadata"]["labels"].get("jobset.sigs.k8s.io/restart-attempt") == attempt]
        return found if len(found) == 2 else []

    try:
        before = cluster.wait_for("both slices running", lambda: running("0"), timeout=120)
        [victim] = [p for p in before if p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] == "1"]
        killed = elxpk("workload", "kill-slice", name, "--slice", "1", "--mode", "delete", "--yes", cluster=cluster)
        assert killed.returncode == 0, killed.stderr
        status, pod = cluster.request("GET", PODS.format(ns=NS) + "/" + victim["metadata"]["name"])
        assert status == 404 or (pod["metadata"]["uid"] != victim["metadata"]["uid"]) or (
            pod["metadata"].get("deletionGracePeriodSeconds") == 0), pod["metadata"]
        cluster.wait_for("the group restarted", lambda: running("1"), timeout=120)

        deleted = elxpk("workload", "delete", name, "--yes", cluster=cluster)
        assert deleted.returncode == 0, deleted.stderr
        status, jobset = cluster.request("GET", JOBSETS.format(ns=NS) + "/" + name)
        # Its pods have 10 s of grace to live out: a Foreground delete keeps the JobSet, marked, until they are gone.
        assert status == 200 and "foregroundDeletion" in jobset["metadata"].get("finalizers", []), (status, jobset)
        assert cluster.items(PODS.format(ns=NS), labelSelector=selector)
        cluster.wait_for("the JobSet gone after its pods", lambda: cluster.request(
            "GET", JOBSETS.format(ns=NS) + "/" + name)[0] == 404, timeout=120)
        assert not cluster.items(PODS.format(ns=NS), labelSelector=selector)
    finally:  # the pool's two nodes are the next workload's
        elxpk("workload", "delete", name, "--yes", cluster=cluster)
        cluster.wait_for("the workload gone", lambda: not cluster.items(PODS.format(ns=NS), labelSelector=selector),
                         timeout=120)


def exec_in(cluster: LocalCluster, name: str, container: str, command: list[str]) -> tuple[str, str, int | None]:
    """`kubectl exec` through the API server (the official client's WebSocket, with the cluster's own CA, as
    the client reads it from the kubeconfig): (stdout, stderr, exit code)."""
    from kubernetes import client
    from kubernetes.stream import stream

    resp = stream(client.CoreV1Api(cluster.client).connect_get_namespaced_pod_exec, name, NS, command=command,
                  container=container, stdin=False, stdout=True, stderr=True, tty=False, _preload_content=False)
    resp.run_forever(timeout=60)
    out, err = resp.read_stdout(timeout=0), resp.read_stderr(timeout=0)
    code = resp.returncode
    resp.close()
    return out or "", err or "", code


def test_exec_runs_in_the_container_and_kill_1_reaches_its_process(cluster: LocalCluster) -> None:
    """Exec (vk/exec.go) runs the command in the container as a kubelet does: the container's env, working
    dir, hostname and /etc/hosts, its own PID namespace, stdout and stderr apart, and the exit code back.
    `kill -TERM 1` there (what `kill-slice --mode exit` runs) reaches the container's process, here a shell
    that traps it and exits 42, and never this machine's init."""
    assert cluster.serves_exec(), "the process pool's nodes say they serve no exec (testcluster-vk not root?)"
    script = "trap 'echo got TERM; exit 42' TERM; echo \"started in $(pwd)\"; while true; do sleep 0.2; done"
    containers = [bash("main", script, env=[{"name": "FOO", "value": "bar"}]), bash("ended", "true", chips=0)]
    name = create(cluster, pod_manifest("pp-exec", containers, hostname="worker-0", subdomain="pp-exec"))
    try:
        started = cluster.wait_for("the process started", lambda: log(cluster, name, "main", check=False))
        out, err, code = exec_in(cluster, name, "main", [
            "sh", "-c", 'echo "$FOO $(hostname) $(pwd)"; getent hosts worker-0.pp-exec | cut -d" " -f1; '
                        "ps -o args= -p 1; echo to-stderr >&2; exit 3"])
        pod = get(cluster, name)
        assert code == 3, (out, err)
        workdir = started.split("started in ", 1)[1].split()[0]
        lines = out.splitlines()
        assert lines[:2] == [f"bar worker-0 {workdir}", pod["status"]["podIP"]], out
        assert " container-init " in lines[2] and lines[2].endswith(f" -- bash -c {script}"), out  # PID 1: vk/init.go
        assert err == "to-stderr\n"
        assert exec_in(cluster, name, "main", ["no-such-command"])[2] not in (0, None)
        # A container that has ended, in a pod still Running: the node refuses after the upgrade, with a Status
        # that has no exit code, which elxpk's exec reads as an error (the client's `returncode` raised).
        kube = connect(ClusterTarget(kubeconfig=str(cluster.kubeconfig)))
        with pytest.raises(ClusterError, match=r"failed: .*error executing command in container: container ended of pod .* is not running$"):
            kube.exec_in_pod(NS, name, "ended", ["true"])
        assert kube.exec_in_pod(NS, name, "main", ["sh", "-c", "echo $FOO; exit 4"]) == ("bar\n", 4)

        out, err, code = exec_in(cluster, name, "main", ["/bin/sh", "-c", "kill -TERM 1"])
        assert code == 0, (out, err)
        pod = finished(cluster, name)
        assert terminated(pod, "main")["exitCode"] == 42
        assert "got TERM" in log(cluster, name, "main")
    finally:
        remove(cluster, name)

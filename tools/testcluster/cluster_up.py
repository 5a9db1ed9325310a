"""`testcluster up`: certificates, the processes in dependency order, then the cluster's objects.

Every process binds 127.0.0.1 only, on ports picked free at start; each one's log is <run dir>/logs/NAME.log
and its pid is in <run dir>/pids.json (what `down` stops).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import flex_start
import yaml
from nodes import nodes, pool_nodes, process_pool_config
from pki import write_kubeconfig, write_pki

PRIORITIES = {"very-low": 100, "low": 250, "medium": 500, "high": 750, "very-high": 1000}  # xpk's
QUEUES = {"default": "multislice-queue", "team-a": "team-queue"}  # namespace -> LocalQueue
# xpk's ClusterQueue preemption (`xpk cluster create`, its kueue config): a workload of a higher priority
# (--priority, the PriorityClasses above) preempts a lower one in the same queue; never another queue's.
XPK_PREEMPTION = {"reclaimWithinCohort": "Never", "withinClusterQueue": "LowerPriority"}
# kwok's node leases: renewed every quarter of this. At kwok's 40 s the 30 nodes of the default pools renewed
# about 3 leases a second, each an API write and an etcd one, for as long as a cluster ran; no test waits for a
# node to go unreachable.
NODE_LEASE_S = 240
EXIT_CODE_ANNOTATION = "testcluster.elxpk.dev/exit-code"
DEFAULT_BUCKET = "testcluster"  # made by up: gs://testcluster/ exists on every cluster
# A pod whose first container has this image never pulls it (stage image-pull of stages.yaml), so kwok's
# pod-ready must leave it alone: a kubelet never starts a container whose image it could not pull.
UNPULLABLE_IMAGE = "registry.testcluster.invalid/no-such-image:1"
# What kwok serves as the log of every container (kwok has no processes; `logs` reads this file), in the
# CRI log format a kubelet reads (time, stream, P(artial)/F(ull), text).
POD_LOG = ("2026-01-01T00:00:00.000000000Z stdout F testcluster: log line 1 of a kwok container\n"
           "2026-01-01T00:00:01.000000000Z stderr F testcluster: log line 2 of a kwok container\n")
# What kwok serves for `previous=true` (the log of a container's last terminated instance).
POD_LOG_PREVIOUS = "2026-01-01T00:00:02.000000000Z stderr F testcluster: the previous instance's last line\n"


def start(run_dir: Path, bins: Path, here: Path, *, pools: str, process_pools: str = "", vk_binary: str = "") -> None:
    started = time.monotonic()
    pool_nodes(pools, "--pools")  # bad input ends here, before anything starts
    pool_nodes(process_pools, "--process-pools", kind="proc")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "logs").mkdir(exist_ok=True)
    ports = {name: free_port() for name in ("etcd", "etcd-peer", "apiserver", "kcm", "scheduler", "jobset",
                                             "jobset-health", "kueue", "kueue-health", "kwok", "gcs", "vk")}
    pki = write_pki(run_dir / "pki")
    procs = Processes(run_dir, bins)
    procs.start("etcd", "--name=node0", f"--data-dir={run_dir / 'etcd'}", "--unsafe-no-fsync",
                f"--listen-client-urls=http://127.0.0.1:{ports['etcd']}",
                f"--advertise-client-urls=http://127.0.0.1:{ports['etcd']}",
                f"--listen-peer-urls=http://127.0.0.1:{ports['etcd-peer']}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{ports['etcd-peer']}",
                f"--initial-cluster=node0=http://127.0.0.1:{ports['etcd-peer']}")
    procs.wait("etcd", lambda: _http_ok(f"http://127.0.0.1:{ports['etcd']}/health"))
    procs.start("kube-apiserver", f"--etcd-servers=http://127.0.0.1:{ports['etcd']}",
                "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={ports['apiserver']}",
                f"--tls-cert-file={pki / 'serving.crt'}", f"--tls-private-key-file={pki / 'serving.key'}",
                f"--client-ca-file={pki / 'ca.crt'}", f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none",
                f"--requestheader-client-ca-file={pki / 'ca.crt'}", f"--proxy-client-cert-file={pki / 'admin.crt'}",
                f"--proxy-client-key-file={pki / 'admin.key'}", "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group", "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                "--kubelet-preferred-address-types=InternalIP",  # 127.0.0.1: kwok serves the "kubelet" API
                "--authorization-mode=RBAC", "--allow-privileged=true", "--enable-priority-and-fairness=false",
                "--profiling=false")
    api = Api(f"https://127.0.0.1:{ports['apiserver']}", pki)
    procs.wait("kube-apiserver", api.ready)
    kubeconfig = write_kubeconfig(run_dir / "kubeconfig", api.server, pki)
    common = [f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
              f"--authorization-kubeconfig={kubeconfig}", "--bind-address=127.0.0.1", "--leader-elect=false",
              "--kube-api-qps=200", "--kube-api-burst=400"]
    procs.start("kube-controller-manager", *common, f"--secure-port={ports['kcm']}",
                f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
                "--use-service-account-credentials=false", "--concurrent-job-syncs=20",
                # Every pod here has a loopback address, which an Endpoints or EndpointSlice may not hold: their
                # controllers retried each JobSet's headless Service for as long as it lived (a third of the
                # API's writes in one lane, all refused with 422). Nothing here resolves a Service.
                "--controllers=*,-endpoints-controller,-endpointslice-controller,-endpointslice-mirroring-controller",
                # kwok renews its nodes' leases every quarter of their duration (below); a node whose lease is
                # older than this is marked unreachable and its pods evicted.
                f"--node-monitor-grace-period={NODE_LEASE_S + 60}s")
    procs.start("kube-scheduler", *common, f"--secure-port={ports['scheduler']}")

    api.apply_file(here.parent.parent / "elxpk" / "crds" / "jobset.x-k8s.io_jobsets.yaml")
    for crd in kueue_crds(bins / "kueue-crd", ports["kueue"], pki):
        api.apply(crd)
    api.apply_file(flex_start.CRD)  # before Kueue starts: its ProvisioningRequest check needs the kind served
    api.wait_established(timeout=60)
    for namespace in ("kueue-system", "jobset-system", *QUEUES):
        api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})

    kueue_metrics_certs(pki)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    for name, config in controller_configs(run_dir, pki, ports).items():
        path = run_dir / f"{name}-config.yaml"
        path.write_text(yaml.safe_dump(config))
        procs.start(name, f"--config={path}", f"--kubeconfig={kubeconfig}", env=env)
        health = ports[f"{name}-health"]
        procs.wait(name, lambda health=health: _http_ok(f"http://127.0.0.1:{health}/readyz"), timeout=120)
        for hook in webhook_configs(bins / f"{name}-webhooks.yaml", name, ports[name], pki):
            api.apply(hook)

    stages = [bins / f for f in ("kwok-node-initialize.yaml", "kwok-pod-ready.yaml")]
    kwok_config = run_dir / "kwok.yaml"
    (run_dir / "pod.log").write_text(POD_LOG)
    (run_dir / "pod-previous.log").write_text(POD_LOG_PREVIOUS)
    logs = yaml.safe_dump({"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs",
                           "metadata": {"name": "every-container"},
                           "spec": {"logs": [{"logsFile": str(run_dir / "pod.log"), "follow": False,
                                              "previousLogsFile": str(run_dir / "pod-previous.log")}]}})
    texts = [_unpulled_left_alone(p.read_text()) for p in stages]
    kwok_config.write_text("\n---\n".join([*texts, (here / "stages.yaml").read_text(), logs]))
    procs.start("kwok", f"--kubeconfig={kubeconfig}", f"--config={kwok_config}", "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake", "--node-ip=127.0.0.1",
                f"--server-address=127.0.0.1:{ports['kwok']}", f"--node-port={ports['kwok']}", f"--tls-cert-file={pki / 'serving.crt'}",
                f"--tls-private-key-file={pki / 'serving.key'}", f"--node-lease-duration-seconds={NODE_LEASE_S}")
    # One bucket to start with (an empty folder of the seed is an empty bucket), so the README's "Try the
    # cluster verbs without a cloud" can put checkpoints on gs://testcluster/ without a bucket-making step.
    # The memory backend: the filesystem one walks the whole bucket and reads every object's metadata file
    # on each listing, and gcsfs lists at nearly every call (25 CPU s of the server in one story lane, its
    # bucket a few hundred objects of the lane's runs); the lane's objects are a few hundred MB at most.
    (run_dir / "gcs" / DEFAULT_BUCKET).mkdir(parents=True, exist_ok=True)
    procs.start("fake-gcs-server", "-scheme=http", "-host=127.0.0.1", f"-port={ports['gcs']}",
                "-backend=memory", f"-data={run_dir / 'gcs'}",
                f"-public-host=127.0.0.1:{ports['gcs']}", f"-external-url=http://127.0.0.1:{ports['gcs']}",
                "-log-level=warn")
    procs.wait("fake-gcs-server", lambda: _http_ok(f"http://127.0.0.1:{ports['gcs']}/storage/v1/b"))

    for node in nodes(pools):
        api.apply(node)
    process_nodes = [node for _, node in pool_nodes(process_pools, "--process-pools", kind="proc")]
    if process_nodes:
        config = process_pool_config(run_dir, pki, ports, here.parent.parent, process_pools, process_nodes)
        (run_dir / "vk-nodes.json").write_text(json.dumps(config, indent=1))
        procs.start(vk_binary, f"--kubeconfig={kubeconfig}", f"--config={run_dir / 'vk-nodes.json'}", env=env)
        procs.wait(vk_binary, lambda: all(api.node_ready(node["metadata"]["name"]) for node in process_nodes),
                   timeout=60)
    all_nodes = [*nodes(pools), *process_nodes]
    chips = sum(int(n["status"]["capacity"].get("google.com/tpu", "0")) for n in all_nodes)
    for obj in cluster_objects(all_nodes) + flex_start.flex_start_objects(chips, XPK_PREEMPTION):
        api.apply(obj, retry_webhook=True)
    (run_dir / "env").write_text(f"KUBECONFIG={kubeconfig}\nSTORAGE_EMULATOR_HOST=http://127.0.0.1:{ports['gcs']}\n")
    print(f"testcluster: up in {time.monotonic() - started:.1f} s ({run_dir})", file=sys.stderr)


def _unpulled_left_alone(stage_text: str) -> str:
    """kwok's pod-ready stage, not matching a pod of UNPULLABLE_IMAGE (other stages unchanged)."""
    stage = yaml.safe_load(stage_text)
    if stage["metadata"]["name"] != "pod-ready":
        return stage_text
    stage["spec"]["selector"]["matchExpressions"].append(
        {"key": ".spec.containers.[0].image", "operator": "NotIn", "values": [UNPULLABLE_IMAGE]})
    return yaml.safe_dump(stage, sort_keys=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Processes:
    """Starts the binaries in their own sessions, records their pids; a dead one stops `up` with its log."""

    def __init__(self, run_dir: Path, bins: Path) -> None:
        self.run_dir, self.bins = run_dir, bins
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, *args: str, env: dict | None = None) -> None:
        log = (self.run_dir / "logs" / f"{name}.log").open("ab")
        # Go's collector took about a seventh of the API server's CPU (a profile of one lane); at GOGC=200 it runs
        # half as often, for a heap up to 3x what is live instead of 2x (the operator's own GOGC wins).
        env = {"GOGC": "200", **(os.environ if env is None else env)}
        self.procs[name] = subprocess.Popen([str(self.bins / name), *args], stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=self.run_dir, env=env,
                                            start_new_session=True)
        pids = {n: p.pid for n, p in self.procs.items()}
        (self.run_dir / "pids.json").write_text(json.dumps(pids))

    def wait(self, name: str, ready: Callable[[], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            for other, proc in self.procs.items():
                if proc.poll() is not None:
                    self.fail(f"{other} exited with {proc.returncode}", other)
            if time.monotonic() > deadline:
                self.fail(f"{name} not ready after {timeout:.0f} s", name)
            time.sleep(0.2)

    def fail(self, message: str, name: str) -> None:
        log = self.run_dir / "logs" / f"{name}.log"
        tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
        sys.exit("\n".join([*tail, f"testcluster: {message} (log: {log}); stop the rest with `down`"]))


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return 200 <= response.status < 300
    except (OSError, urllib.error.URLError):
        return False


class Api:
    """The few REST calls `up` needs, with the admin client certificate (no kubectl, no client library)."""

    PATHS = {"CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
             "Namespace": "/api/v1/namespaces", "Node": "/api/v1/nodes",
             "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
             "ValidatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
             "MutatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
             "ResourceFlavor": "/apis/kueue.x-k8s.io/v1beta2/resourceflavors",
             "ClusterQueue": "/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
             "LocalQueue": "/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/localqueues",
             "ServiceAccount": "/api/v1/namespaces/{namespace}/serviceaccounts",
             **flex_start.PATHS}

    def __init__(self, server: str, pki: Path) -> None:
        self.server = server
        self.context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.server + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
                return response.status, _json(response.read())
        except urllib.error.HTTPError as err:
            return err.code, _json(err.read())
        except (OSError, urllib.error.URLError) as err:
            return 0, {"message": str(err)}

    def ready(self) -> bool:
        return self.call("GET", "/readyz")[0] == 200

    def node_ready(self, name: str) -> bool:
        code, body = self.call("GET", f"/api/v1/nodes/{name}")
        return code == 200 and any(c.get("type") == "Ready" and c.get("status") == "True"
                                   for c in body.get("status", {}).get("conditions") or [])

    def apply_file(self, path: Path) -> None:
        for obj in yaml.safe_load_all(path.read_text()):
            if obj:
                self.apply(obj)

    def apply(self, obj: dict, *, retry_webhook: bool = False) -> None:
        """Create `obj`; an existing one is left as it is. Retries while a webhook is not yet reachable."""
        path = self.PATHS[obj["kind"]].format(namespace=obj["metadata"].get("namespace", "default"))
        deadline = time.monotonic() + 60
        while True:
            code, body = self.call("POST", path, obj)
            if code in (200, 201, 409):
                return
            message = str(body.get("message", body))
            if retry_webhook and ("webhook" in message or code in (0, 500)) and time.monotonic() < deadline:
                time.sleep(0.5)
                continue
            sys.exit(f"testcluster: creating {obj['kind']} {obj['metadata']['name']} failed ({code}): {message}")

    def wait_established(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            _, body = self.call("GET", self.PATHS["CustomResourceDefinition"])
            items = body.get("items", [])
            if items and all(any(c["type"] == "Established" and c["status"] == "True"
                                 for c in item.get("status", {}).get("conditions") or []) for item in items):
                return
            time.sleep(0.3)
        sys.exit("testcluster: CRDs not established")


def _json(data: bytes) -> dict:
    """A JSON body, or the text of a plain one (/readyz answers text) as its message."""
    try:
        body = json.loads(data or b"{}")
    except ValueError:
        return {"message": data.decode(errors="replace")}
    return body if isinstance(body, dict) else {"message": str(body)}


def kueue_metrics_certs(pki: Path) -> None:
    """Kueue without its own certificate management reads a metrics certificate from a fixed path
    (cmd/kueue/main.go: /etc/kueue/metrics/certs) and exits when there is none, even with metrics off: give it
    one there if there is none (any certificate will do; the metrics endpoint is not served)."""
    certs = Path("/etc/kueue/metrics/certs")
    if (certs / "tls.crt").exists() and (certs / "tls.key").exists():
        return
    try:
        certs.mkdir(parents=True, exist_ok=True)
        (certs / "tls.crt").write_bytes((pki / "serving.crt").read_bytes())
        (certs / "tls.key").write_bytes((pki / "serving.key").read_bytes())
    except OSError as err:
        sys.exit(f"testcluster: Kueue needs a certificate in {certs} and it cannot be written ({err}); "
                 "create that folder writable once (e.g. with sudo)")


def controller_configs(run_dir: Path, pki: Path, ports: dict[str, int]) -> dict[str, dict]:
    """JobSet's and Kueue's Configuration files: their own certificates off, everything on 127.0.0.1."""
    def common(name: str) -> dict:
        return {"leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
                "webhook": {"port": ports[name], "host": "127.0.0.1", "certDir": str(pki / "webhook")},
                "metrics": {"bindAddress": "0"},
                "health": {"healthProbeBindAddress": f"127.0.0.1:{ports[name + '-health']}"}}

    return {
        "jobset": {"apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration", **common("jobset")},
        "kueue": {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": "kueue-system",
                  **common("kueue"), "manageJobsWithoutQueueName": False,
                  "featureGates": {"VisibilityOnDemand": False},
                  "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}},
    }


def webhook_configs(manifest: Path, owner: str, port: int, pki: Path) -> list[dict]:
    """Upstream's webhook configurations, pointed at https://127.0.0.1:PORT instead of an in-cluster Service.

    Kueue's list covers every framework it integrates; only those it serves here (its own kinds, Job, JobSet)
    are installed, since a webhook nobody serves would fail every matching request."""
    ca = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
    out = []
    for doc in yaml.safe_load_all(manifest.read_text()):
        if not doc:
            continue
        hooks = []
        for hook in doc.get("webhooks", []):
            path = hook["clientConfig"]["service"]["path"]
            if owner == "kueue" and not any(s in path for s in ("kueue-x-k8s-io", "batch-v1-job", "jobset")):
                continue
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
            hooks.append(hook)
        doc["metadata"] = {"name": f"{owner}-{doc['metadata']['name']}"}
        doc["webhooks"] = hooks
        out.append(doc)
    return out


def kueue_crds(crd_dir: Path, port: int, pki: Path) -> list[dict]:
    """Kueue's CRDs with the conversion webhooks its kustomization patches in, served by Kueue on 127.0.0.1."""
    kustomization = yaml.safe_load((crd_dir / "kustomization.yaml").read_text())
    converted = {yaml.safe_load((crd_dir / p["path"]).read_text())["metadata"]["name"]
                 for p in kustomization.get("patches") or [] if "webhook_in_" in p["path"]}
    ca = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
    crds = [yaml.safe_load((crd_dir / path).read_text()) for path in kustomization["resources"]]
    for crd in crds:
        if crd["metadata"]["name"] in converted:
            crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": f"https://127.0.0.1:{port}/convert", "caBundle": ca},
                "conversionReviewVersions": ["v1"]}}
    return crds


def cluster_objects(all_nodes: list[dict]) -> list[dict]:
    """What `xpk cluster create` adds: PriorityClasses, a ClusterQueue with the TPU quota and xpk's preemption
    by priority (and, for GPU node
    pools, a ResourceFlavor per accelerator with its GPUs, as xpk makes one for a GPU cluster), LocalQueues,
    the xpk-sa service account."""
    chips, gpus = 0, {}
    for node in all_nodes:
        capacity = node["status"]["capacity"]
        chips += int(capacity.get("google.com/tpu", "0"))
        if "nvidia.com/gpu" in capacity:
            accelerator = node["metadata"]["labels"]["cloud.google.com/gke-accelerator"]
            gpus[accelerator] = gpus.get(accelerator, 0) + int(capacity["nvidia.com/gpu"])
    objs: list[dict] = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                         "value": value} for name, value in PRIORITIES.items()]
    objs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                 "metadata": {"name": "default-flavor"}})
    quota = {"cpu": "100000", "memory": "100Ti", "google.com/tpu": str(chips)}
    groups = [{"coveredResources": list(quota), "flavors": [{"name": "default-flavor", "resources": [
        {"name": name, "nominalQuota": value} for name, value in quota.items()]}]}]
    if gpus:
        # A workload asking nvidia.com/gpu gets the flavor of its accelerator only (the flavor's node label
        # must match the pod's nodeSelector): a GPU type no node pool has stays Queued, as on an xpk cluster.
        objs += [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": accelerator},
                  "spec": {"nodeLabels": {"cloud.google.com/gke-accelerator": accelerator}}} for accelerator in gpus]
        groups.append({"coveredResources": ["nvidia.com/gpu"], "flavors": [
            {"name": accelerator, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": str(count)}]}
            for accelerator, count in sorted(gpus.items())]})
    objs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cluster-queue"},
                 "spec": {"namespaceSelector": {}, "preemption": XPK_PREEMPTION, "resourceGroups": groups}})
    objs += [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
              "metadata": {"name": queue, "namespace": namespace}, "spec": {"clusterQueue": "cluster-queue"}}
             for namespace, queue in QUEUES.items()]
    # The service account a GPU render's pods name (serviceAccountName: xpk-sa, made by `xpk cluster create`).
    objs += [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "xpk-sa", "namespace": namespace}}
             for namespace in QUEUES]
    return objs

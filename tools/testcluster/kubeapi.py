"""The tests' own view of the test control plane: raw REST calls through the kubernetes client's ApiClient,
and what the cluster would decide about a manifest."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets"
JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"
PODS = "/api/v1/namespaces/{ns}/pods"
EXIT_CODE = "testcluster.elxpk.dev/exit-code"
EXEC_ANNOTATION = "testcluster.elxpk.dev/exec"  # vk/main.go: ExecAnnotation
DRY_RUN = [("dryRun", "All"), ("fieldValidation", "Strict")]  # kubectl's field validation


@dataclass
class LocalCluster:
    run_dir: Path
    kubeconfig: Path
    storage_emulator_host: str
    _client: Any = field(default=None, repr=False)

    @classmethod
    def from_run_dir(cls, run_dir: Path) -> LocalCluster:
        env = dict(line.split("=", 1) for line in (run_dir / "env").read_text().splitlines() if "=" in line)
        return cls(run_dir, Path(env["KUBECONFIG"]), env["STORAGE_EMULATOR_HOST"])

    @property
    def client(self) -> Any:
        if self._client is None:
            from kubernetes import config

            self._client = config.new_client_from_config(str(self.kubeconfig))
        return self._client

    def request(self, method: str, path: str, body: Any = None, query: list | None = None,
                content_type: str = "application/json") -> tuple[int, dict]:
        """One call: (HTTP status, JSON body); an error status is returned, not raised."""
        serialized = self.client.param_serialize(
            method, path, query_params=query or None, body=body, auth_settings=["BearerToken"],
            header_params={"Content-Type": content_type, "Accept": "application/json"})
        response = self.client.call_api(*serialized, _request_timeout=30)
        data = response.read()
        try:
            return response.status, dict(json.loads(data or b"{}"))
        except ValueError:
            return response.status, {"message": data.decode(errors="replace")}

    def ready(self) -> bool:
        try:
            return self.request("GET", "/readyz")[0] == 200
        except OSError:
            return False

    def items(self, path: str, **query: str) -> list[dict]:
        status, body = self.request("GET", path, query=list(query.items()))
        assert status == 200, body
        return list(body.get("items", []))

    def exit_pods(self, namespace: str, selector: str, code: int) -> int:
        """Make the containers of the running pods matching `selector` exit with `code` (kwok's pod-exit
        stage of tools/testcluster/stages.yaml); returns how many pods were told."""
        told = 0
        for pod in self.items(PODS.format(ns=namespace), labelSelector=selector):
            if pod["status"].get("phase") != "Running":
                continue
            status, body = self.request(
                "PATCH", PODS.format(ns=namespace) + "/" + pod["metadata"]["name"],
                {"metadata": {"annotations": {EXIT_CODE: str(code)}}}, content_type="application/merge-patch+json")
            assert status == 200, body
            told += 1
        return told

    def serves_exec(self) -> bool:
        """Whether the process pools' nodes serve exec (vk/exec.go: only where testcluster-vk could give each
        container namespaces of its own, as root; each node says so in an annotation, vk/main.go)."""
        nodes = self.items("/api/v1/nodes", labelSelector="type=virtual-kubelet")
        return bool(nodes) and all(
            (node["metadata"].get("annotations") or {}).get(EXEC_ANNOTATION) == "true" for node in nodes)

    def remove_jobset(self, namespace: str, name: str) -> None:
        """Delete a JobSet left by an earlier run on this cluster (its Jobs and pods first) and wait till gone."""
        path = JOBSETS.format(ns=namespace) + "/" + name
        self.request("DELETE", path, {"propagationPolicy": "Foreground"})
        self.wait_for(f"{name} deleted", lambda: self.request("GET", path)[0] == 404)

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float = 90) -> Any:
        """Poll `check` until it returns something truthy (the controllers run on their own time)."""
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found:
                return found
            assert time.monotonic() < deadline, f"{what}: not seen within {timeout:.0f} s"
            time.sleep(0.5)


def server_verdict(cluster: LocalCluster, doc: dict) -> list[str]:
    """What the cluster says about a JobSet: the API server and the JobSet webhook at create (dryRun=All,
    strict field validation), then the batch/v1 Job of every replicatedJob as the JobSet controller would
    create it (the Job rules, which the JobSet webhook does not apply), then a pod of that Job as the Job
    controller would create it. Empty: admitted."""
    namespace = doc.get("metadata", {}).get("namespace") or "default"
    group_version = doc.get("apiVersion", "")
    path = f"/apis/{group_version}/namespaces/{namespace}/jobsets"
    status, body = cluster.request("POST", path, doc, DRY_RUN)
    if status not in (200, 201):
        return [f"JobSet {status}: {body.get('message', body)}"]
    problems = []
    name = body["metadata"]["name"]
    for rjob in body["spec"]["replicatedJobs"]:
        template = rjob["template"]
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": f"{name}-{rjob['name']}-{max(rjob.get('replicas', 1) - 1, 0)}",
                            "namespace": namespace, "labels": template.get("metadata", {}).get("labels", {}),
                            "annotations": template.get("metadata", {}).get("annotations", {})},
               "spec": template["spec"]}
        status, answer = cluster.request("POST", JOBS.format(ns=namespace), job, DRY_RUN)
        if status not in (200, 201):
            problems.append(f"Job of {rjob['name']} {status}: {answer.get('message', answer)}")
            continue
        # The Job API admits pod templates that no pod can be made of (an empty image, for one): the Job
        # controller's pod create is the last gate.
        pod_template = answer["spec"]["template"]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {**pod_template.get("metadata", {}), "name": f"{job['metadata']['name']}-0-abcde",
                            "namespace": namespace},
               "spec": pod_template["spec"]}
        status, answer = cluster.request("POST", PODS.format(ns=namespace), pod, DRY_RUN)
        if status not in (200, 201):
            problems.append(f"pod of {rjob['name']} {status}: {answer.get('message', answer)}")
    return problems

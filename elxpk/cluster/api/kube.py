"""The Kubernetes API as elxpk uses it: plain dicts in and out, one method per resource it reads or changes.

The HTTP side (one request, its retries and deadlines, paging) is `kube_transport.KubeTransport`; this module
names the paths and the words of the one-line errors for JobSets, Jobs, Pods, Events, Nodes and Kueue's objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext

from elxpk.cluster.api.answer import RESPONSE_BYTES, NotAnObject, parse_object, too_large
from elxpk.cluster.api.api_errors import ApiFailure, api_error, missing_namespace
from elxpk.cluster.api.kube_transport import WATCH_MARGIN_S, KubeTransport, api_path, plural_of
from elxpk.cluster.objects.meta import Meta
from elxpk.errors import ClusterError, NotFoundError

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
KUEUE_GROUP = "kueue.x-k8s.io"


class Kube(KubeTransport):
    """One cluster's API: the resources elxpk uses, over `KubeTransport`'s requests."""

    _kueue_looked_up = False  # an instance's own once it is, with what it found:
    _kueue_version: str | None = None  # None: Kueue is absent

    # --- JobSets and any namespaced object ------------------------------------------------------------

    def get_jobset(self, namespace: str, name: str) -> dict:
        return self.get(api_path(JOBSET_API, "jobsets", namespace, name),
                        what=f'JobSet "{name}" in namespace "{namespace}"')

    def list_jobsets(self, namespace: str, label_selector: str | None = None) -> list[dict]:
        return self._paged(api_path(JOBSET_API, "jobsets", namespace), label_selector=label_selector,
                           what=f'JobSets in namespace "{namespace}"')

    def delete_jobset(self, namespace: str, name: str, *, uid: str, propagation: str = "Foreground") -> dict:
        """Delete exactly the JobSet `uid` (a precondition: one recreated under the name meanwhile stays)."""
        return self.request("DELETE", api_path(JOBSET_API, "jobsets", namespace, name), verb="delete",
                            what=f'JobSet "{name}" in namespace "{namespace}"',
                            body=_delete_options(uid, propagationPolicy=propagation))

    def create(self, obj: dict, namespace: str, *, dry_run: bool = False) -> dict:
        """POST one object. Not retried here: after an unanswered POST the caller checks what landed."""
        kind, name = obj.get("kind", ""), Meta.of(obj).name or ""
        return self.request("POST", api_path(obj["apiVersion"], plural_of(kind), namespace), verb="create",
                            what=f'{kind} "{name}" in namespace "{namespace}"', body=obj, retry=False,
                            query={"dryRun": "All" if dry_run else None, "fieldValidation": "Strict"})

    def get_object(self, obj: dict, namespace: str) -> dict:
        kind, name = obj.get("kind", ""), str(Meta.of(obj).name)
        return self.get(api_path(obj["apiVersion"], plural_of(kind), namespace, name),
                        what=f'{kind} "{name}" in namespace "{namespace}"')

    def delete_object(self, obj: dict, namespace: str, *, uid: str) -> None:
        """Delete exactly the stored object `uid` of `obj`'s kind and name."""
        kind, name = obj.get("kind", ""), str(Meta.of(obj).name)
        self.request("DELETE", api_path(obj["apiVersion"], plural_of(kind), namespace, name), verb="delete",
                     what=f'{kind} "{name}" in namespace "{namespace}"',
                     body=_delete_options(uid, propagationPolicy="Foreground"))

    # --- children: Jobs and Pods --------------------------------------------------------------------

    def list_jobs(self, namespace: str, label_selector: str) -> list[dict]:
        return self._paged(api_path("batch/v1", "jobs", namespace), label_selector=label_selector,
                           what=f'Jobs in namespace "{namespace}"')

    def list_pods(self, namespace: str, label_selector: str, field_selector: str | None = None) -> list[dict]:
        return self._paged(api_path("v1", "pods", namespace), label_selector=label_selector,
                           field_selector=field_selector, what=f'Pods in namespace "{namespace}"')

    def delete_pod(self, namespace: str, name: str, *, uid: str, grace_period_seconds: int | None = None) -> None:
        """Delete exactly the pod `uid` (its replacement, under the same name, is never hit)."""
        self.request("DELETE", api_path("v1", "pods", namespace, name), verb="delete",
                     what=f'Pod "{name}" in namespace "{namespace}"',
                     body=_delete_options(uid, gracePeriodSeconds=grace_period_seconds))

    def pod_log(self, namespace: str, pod: str, container: str | None, *, tail_lines: int | None = None,
                previous: bool = False) -> str:
        """The container's log, up to RESPONSE_BYTES and within the request deadline (what kill-slice reads
        for the trainer's recovery event); `previous`: of its last terminated instance (kept by the kubelet
        until the pod goes)."""
        lines, size = [], 0
        for line in self.pod_log_lines(namespace, pod, container, tail_lines=tail_lines, previous=previous,
                                       total_s=self.total_s):
            size += len(line) + 1
            if size > RESPONSE_BYTES:
                raise too_large(self.host, RESPONSE_BYTES, f'get the logs of Pod "{pod}"')
            lines.append(line)
        return "\n".join(lines)

    def pod_log_lines(self, namespace: str, pod: str, container: str | None, *, tail_lines: int | None = None,
                      previous: bool = False, follow: bool = False, total_s: float | None = None) -> Iterator[str]:
        """The log's lines as they arrive (each cut at LINE_BYTES), so a log of any length streams through
        in bounded memory; `follow`: until the container ends. No deadline unless `total_s`: a log of
        gigabytes, or a quiet followed one, takes the time it takes."""
        stream = self.request("GET", api_path("v1", "pods", namespace, pod, "log"), verb="get",
                              what=f'{"previous " if previous else ""}logs of Pod "{pod}"', stream=True,
                              total_s=total_s,
                              query={"container": container, "tailLines": tail_lines,
                                     "follow": "true" if follow else None, "previous": "true" if previous else None})
        for line in stream.lines():
            yield line.decode("utf-8", "replace")

    def follow_pod_log(self, namespace: str, pod: str, container: str | None,
                       tail_lines: int | None = None) -> Iterator[str]:
        return self.pod_log_lines(namespace, pod, container, tail_lines=tail_lines, follow=True)

    def list_events(self, namespace: str, field_selector: str | None = None) -> list[dict]:
        """core/v1 Events (kept about an hour by the API server: `workload events --record` outlives them)."""
        return self._paged(api_path("v1", "events", namespace), field_selector=field_selector,
                           what=f'Events in namespace "{namespace}"')

    def evict_pod(self, namespace: str, name: str, *, uid: str) -> None:
        """The Eviction API (policy/v1), as a node drain evicts: honours PodDisruptionBudgets, and the
        pod gets a DisruptionTarget condition. Not retried: a 429 means a budget forbids it now."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
                "deleteOptions": _delete_options(uid)}
        self.request("POST", api_path("v1", "pods", namespace, name, "eviction"), verb="evict",
                     what=f'Pod "{name}" in namespace "{namespace}"', body=body, retry=False)

    def exec_in_pod(self, namespace: str, pod: str, container: str, command: list[str], *,
                    timeout_s: float = 60.0) -> tuple[str, int | None]:
        """Run `command` in a container through the API's exec (a WebSocket, via kubernetes.stream):
        (stdout, exit code; None when the connection ended before the command reported one)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream
        from kubernetes.stream.ws_client import ERROR_CHANNEL

        self.calls += 1
        # exec needs the official client's websockets: built here from the same settings, imported only now
        configure = getattr(self.api_client.configuration, "exec_configuration", None)
        try:
            with configure() if configure is not None else nullcontext(self.api_client.configuration) as settings:
                core = client.CoreV1Api(client.ApiClient(settings) if configure is not None else self.api_client)
                resp = stream(core.connect_get_namespaced_pod_exec, pod, namespace, command=command,
                              container=container, stdin=False, stdout=True, stderr=True, tty=False,
                              _preload_content=False, _request_timeout=self.timeout[0])
                resp.run_forever(timeout=timeout_s)
                out = resp.read_stdout(timeout=0)
                code = None if resp.is_open() else exit_code_of(resp.read_channel(ERROR_CHANNEL), pod)
                resp.close()
        except ApiException as exc:
            raise api_error(exc, "exec in", f'Pod "{pod}" in namespace "{namespace}"', self.host) from None
        except (OSError, ValueError) as exc:
            raise ClusterError(f"exec in Pod {pod!r} failed: {str(exc).splitlines()[0] if str(exc) else exc!r}"
                               ) from None
        return out or "", code

    def watch_pods(self, namespace: str, label_selector: str, *, resource_version: str | None = None,
                   timeout_s: int = 300) -> Iterator[tuple[str, dict]]:
        """(event type, pod) from the watch API until the server ends the watch after `timeout_s` (or sooner:
        it drops a watcher that reads too slowly). BOOKMARK events carry only a resourceVersion to resume from;
        an ERROR event (410: `resource_version` is too old to resume from) ends the watch."""
        # The server ends the watch after timeout_s; the deadline (a margin later) ends one it does not end.
        stream = self.request("GET", api_path("v1", "pods", namespace), verb="watch",
                              what=f'Pods in namespace "{namespace}"', stream=True, total_s=timeout_s + WATCH_MARGIN_S,
                              query={"labelSelector": label_selector, "watch": "true", "allowWatchBookmarks": "true",
                                     "resourceVersion": resource_version, "timeoutSeconds": timeout_s})
        try:
            for line in stream.lines():
                if line.strip():
                    event = parse_object(line)
                    if not isinstance(event.get("object") or {}, dict):
                        return
                    yield str(event.get("type", "")), event.get("object") or {}
        except (ClusterError, NotAnObject):
            return  # a watch cut short (a dropped connection, a torn line): the caller lists and watches again
        finally:
            stream.close()

    # --- preflight lookups ----------------------------------------------------------------------------

    def jobset_crd_served(self) -> bool:
        """True when the JobSet API group answers discovery (the CRD is installed and established)."""
        try:
            self.get(f"/apis/{JOBSET_API}", what="the JobSet API (jobset.x-k8s.io/v1alpha2)")
        except NotFoundError:
            return False
        return True

    def namespace_exists(self, namespace: str) -> bool | None:
        """Whether the namespace exists; None when this user may not read namespaces (403): unknown."""
        try:
            self.get(api_path("v1", "namespaces", name=namespace), what=f'namespace "{namespace}"')
        except NotFoundError:
            return False
        except ApiFailure as exc:
            if exc.http_status == 403:
                return None
            raise
        return True

    def require_namespace(self, namespace: str) -> None:
        """UsageError (exit 2) naming the namespace when it does not exist: a GET of an object in it is a 404
        of the object, a LIST an empty list, so a verb would otherwise say "not found" or "none"."""
        if self.namespace_exists(namespace) is False:
            raise missing_namespace(namespace)

    def priority_class_exists(self, name: str) -> bool:
        try:
            self.get(api_path("scheduling.k8s.io/v1", "priorityclasses", name=name), what=f'PriorityClass "{name}"')
        except NotFoundError:
            return False
        return True

    def service_account_exists(self, namespace: str, name: str) -> bool:
        try:
            self.get(api_path("v1", "serviceaccounts", namespace, name),
                     what=f'ServiceAccount "{name}" in namespace "{namespace}"')
        except NotFoundError:
            return False
        return True

    def list_nodes(self, label_selector: str, limit: int | None = None) -> list[dict]:
        body = self.request("GET", api_path("v1", "nodes"), verb="list", what="Nodes",
                            query={"labelSelector": label_selector, "limit": limit})
        return body.get("items") or []

    def kueue_version(self) -> str | None:
        """The served Kueue API version (v1beta2 on Kueue >= 0.15, else v1beta1); None if Kueue is absent."""
        if not self._kueue_looked_up:
            try:
                group = self.get(f"/apis/{KUEUE_GROUP}", what="the Kueue API group")
            except NotFoundError:
                group = {}
            self._kueue_version = (group.get("preferredVersion") or {}).get("version")
            self._kueue_looked_up = True
        return self._kueue_version

    def local_queue_exists(self, namespace: str, name: str) -> bool | None:
        version = self.kueue_version()
        if version is None:
            return None
        try:
            self.get(api_path(f"{KUEUE_GROUP}/{version}", "localqueues", namespace, name),
                     what=f'LocalQueue "{name}" in namespace "{namespace}"')
        except NotFoundError:
            return False
        return True

    def get_kueue_object(self, plural: str, name: str, namespace: str | None = None) -> dict | None:
        """A Kueue object (localqueues, clusterqueues, admissionchecks); None when it or Kueue is absent."""
        version = self.kueue_version()
        if version is None:
            return None
        try:
            return self.get(api_path(f"{KUEUE_GROUP}/{version}", plural, namespace, name),
                            what=f"Kueue {plural[:-1]} {name!r}")
        except NotFoundError:
            return None

    def pending_workloads(self, namespace: str, local_queue: str) -> list[dict] | None:
        """Kueue's visibility API (an aggregated API Kueue serves): the LocalQueue's pending Workloads with
        their positions; None when the API is not served on this cluster."""
        try:
            group = self.get("/apis/visibility.kueue.x-k8s.io", what="Kueue's visibility API")
        except NotFoundError:
            return None
        version = (group.get("preferredVersion") or {}).get("groupVersion")
        if not version:
            return None
        body = self.get(api_path(version, "localqueues", namespace, local_queue, "pendingworkloads"),
                        what=f'pending workloads of LocalQueue "{local_queue}"', query={"limit": 1000})
        return body.get("items") or []

    def list_provisioning_requests(self, namespace: str) -> list[dict] | None:
        """The namespace's ProvisioningRequests (what Kueue's flex-start check asks capacity with); None when
        the cluster does not serve the kind."""
        try:
            return self._paged(api_path("autoscaling.x-k8s.io/v1", "provisioningrequests", namespace),
                               what=f'ProvisioningRequests in namespace "{namespace}"')
        except NotFoundError:
            return None

    def list_kueue_workloads(self, namespace: str, label_selector: str | None = None) -> list[dict]:
        version = self.kueue_version()
        if version is None:
            return []
        return self._paged(api_path(f"{KUEUE_GROUP}/{version}", "workloads", namespace),
                           label_selector=label_selector, what=f'Kueue Workloads in namespace "{namespace}"')


def _delete_options(uid: str, **options: str | int | None) -> dict:
    """DeleteOptions that delete only the object of this uid (the API server answers 409 otherwise), with
    `options` (propagationPolicy, gracePeriodSeconds; None: the server's default). Every option goes in this
    body: the API server reads a DELETE's query parameters only when it has no body (apiserver
    pkg/endpoints/handlers/delete.go), so `?gracePeriodSeconds=0` beside the preconditions was a 30 s
    graceful delete, and `?propagationPolicy=Foreground` a background one."""
    if not uid:
        raise ClusterError("refusing to delete an object whose uid is unknown: it was not resolved first")
    given = {k: v for k, v in options.items() if v is not None}
    return {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}, **given}


def exit_code_of(status_text: str, pod: str) -> int | None:
    """The exit code in an exec's error channel (a Status): 0 on Success, the NonZeroExitCode cause's code, None
    when the connection ended without one (the container went with the command, as a kill of PID 1 may end
    it). The official client's `returncode` raised TypeError or KeyError on the last two; a Failure of any
    other kind (the kubelet could not run the command: the container is not running) is a ClusterError."""
    if not status_text.strip():
        return None
    try:
        status = parse_object(status_text.encode())
    except NotAnObject:
        raise ClusterError(f"exec in Pod {pod!r}: the error channel held no Status: {status_text[:200]!r}") from None
    if status.get("status") == "Success":
        return 0
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode" and str(cause.get("message", "")).lstrip("-").isdigit():
            return int(cause["message"])
    raise ClusterError(f"exec in Pod {pod!r} failed: {status.get('message') or status.get('reason') or status_text}")

"""A scripted JobSet + Job + Kueue controller: drives the fake API server's objects through the sequences a
real cluster shows, one explicit step at a time (no threads, no timers), so tests read like the story:

    ctl.queue(); ctl.admit(); ctl.run()          # Queued -> Admitted -> Running
    ctl.crash_slice(1); ctl.recover_slice(1)     # one slice fails and restarts in place -> Degraded -> Running
    ctl.exhaust_slice(1)                         # backoffLimit hit -> JobSet restart (or Failed past maxRestarts)
    ctl.complete()                               # -> Succeeded
    ctl.reconcile()                              # the Job controller: replace deleted pods, start pending ones

Labels and status fields follow JobSet v1alpha2 (jobset.sigs.k8s.io/*) and batch/v1 Jobs
(batch.kubernetes.io/job-completion-index, ...), as the real controllers write them.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from tests.support.kube_store import Store, utc_iso

JOBSETS = ("jobset.x-k8s.io", "jobsets")
JOBS = ("batch", "jobs")
PODS = ("", "pods")
WORKLOADS = ("kueue.x-k8s.io", "workloads")
JS = "jobset.sigs.k8s.io/"


@dataclass
class ScriptedJobSet:
    store: Store
    namespace: str
    name: str
    clock: Callable[[], float]
    _pod_serial: int = 0

    # --- reading and writing ------------------------------------------------------------------------------

    def jobset(self) -> dict:
        obj = self.store.get(JOBSETS, self.namespace, self.name)
        assert obj is not None, f"JobSet {self.name} does not exist"
        return obj

    def jobs(self) -> list[dict]:
        return self.store.list(JOBS, self.namespace, f"{JS}jobset-name={self.name}")

    def pods(self, selector: str = "") -> list[dict]:
        sel = f"{JS}jobset-name={self.name}" + (f",{selector}" if selector else "")
        return self.store.list(PODS, self.namespace, sel)

    def _now(self) -> str:
        return utc_iso(self.clock())

    def _condition(self, kind: str, status: str, reason: str, message: str = "") -> dict:
        return {"type": kind, "status": status, "reason": reason, "message": message,
                "lastTransitionTime": self._now()}

    def _set_conditions(self, obj: dict, *conditions: dict) -> None:
        existing = {c["type"]: c for c in (obj.setdefault("status", {}).get("conditions") or [])}
        for c in conditions:
            existing[c["type"]] = c
        # Kueue >= 0.15 keeps conditions sorted by type, not time: readers must sort by lastTransitionTime.
        obj["status"]["conditions"] = [existing[k] for k in sorted(existing)]

    # --- Kueue ------------------------------------------------------------------------------------------

    def _workload(self) -> dict | None:
        found = self.store.list(WORKLOADS, self.namespace, f"kueue.x-k8s.io/job-uid={self.jobset()['metadata']['uid']}")
        return found[0] if found else None

    def queue(self, message: str = "couldn't assign flavors to pod set worker: insufficient unused quota") -> None:
        js = self.jobset()
        js["spec"]["suspend"] = True
        self._set_conditions(js, self._condition("Suspended", "True", "SuspendedByKueue", "JobSet suspended"))
        self.store.put(JOBSETS, js)
        queue_name = (js["metadata"].get("labels") or {}).get("kueue.x-k8s.io/queue-name", "multislice-queue")
        digest = hashlib.sha256(js["metadata"]["uid"].encode()).hexdigest()[:5]
        workload = {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"jobset-{self.name}-{digest}", "namespace": self.namespace,
                         "labels": {"kueue.x-k8s.io/job-uid": js["metadata"]["uid"]},
                         "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                              "name": self.name, "uid": js["metadata"]["uid"],
                                              "controller": True}]},
            "spec": {"queueName": queue_name, "podSets": [{"name": r["name"], "count": r.get("replicas", 1)}
                                                         for r in js["spec"]["replicatedJobs"]]},
            "status": {"conditions": [self._condition("QuotaReserved", "False", "Pending", message)]},
        }
        self.store.put(WORKLOADS, workload)

    def _kueue_conditions(self, *conditions: dict) -> None:
        workload = self._workload()
        if workload is not None:
            self._set_conditions(workload, *conditions)
            self.store.put(WORKLOADS, workload)

    def admit(self) -> None:
        self._kueue_conditions(self._condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in "
                                               "ClusterQueue cluster-queue"),
                               self._condition("Admitted", "True", "Admitted", "The workload is admitted"))
        js = self.jobset()
        js["spec"]["suspend"] = False
        self._set_conditions(js, self._condition("Suspended", "False", "ResumeJobs", "jobset is resumed"))
        self.store.put(JOBSETS, js)
        self._create_jobs(attempt=int((js.get("status") or {}).get("restarts") or 0))

    # --- Jobs and Pods --------------------------------------------------------------------------------------

    def _create_jobs(self, attempt: int) -> None:
        js = self.jobset()
        global_index = 0
        for rjob in js["spec"]["replicatedJobs"]:
            for index in range(rjob.get("replicas", 1)):
                self._create_job(js, rjob, index, global_index, attempt)
                global_index += 1
        self._refresh_jobset()

    def _create_job(self, js: dict, rjob: dict, index: int, global_index: int, attempt: int) -> None:
        name = f"{self.name}-{rjob['name']}-{index}"
        labels = {
            f"{JS}jobset-name": self.name, f"{JS}replicatedjob-name": rjob["name"],
            f"{JS}replicatedjob-replicas": str(rjob.get("replicas", 1)), f"{JS}job-index": str(index),
            f"{JS}job-global-index": str(global_index), f"{JS}restart-attempt": str(attempt),
            f"{JS}job-key": hashlib.sha1(f"{self.namespace}/{name}".encode()).hexdigest(),
            f"{JS}jobset-uid": js["metadata"]["uid"],
        }
        spec = copy.deepcopy(rjob["template"]["spec"])
        spec.setdefault("parallelism", 1)
        spec.setdefault("completions", spec["parallelism"])
        spec.setdefault("backoffLimit", 6)
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": name, "namespace": self.namespace, "labels": labels, "annotations": dict(labels),
                            "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                                 "name": self.name, "uid": js["metadata"]["uid"],
                                                 "controller": True, "blockOwnerDeletion": True}]},
               "spec": spec, "status": {"active": 0, "ready": 0, "failed": 0, "succeeded": 0,
                                        "startTime": self._now()}}
        job = self.store.create(JOBS, job)
        for completion in range(min(spec["parallelism"], spec["completions"])):
            self._create_pod(job, completion)
        self._refresh_job(job["metadata"]["name"])

    def _create_pod(self, job: dict, completion: int) -> None:
        self._pod_serial += 1
        suffix = hashlib.sha1(f"{job['metadata']['uid']}/{self._pod_serial}".encode()).hexdigest()[:5]
        template = job["spec"]["template"]
        labels = {**(template.get("metadata", {}).get("labels") or {}), **job["metadata"]["labels"],
                  "batch.kubernetes.io/job-completion-index": str(completion),
                  "batch.kubernetes.io/job-name": job["metadata"]["name"], "job-name": job["metadata"]["name"],
                  "batch.kubernetes.io/controller-uid": job["metadata"]["uid"],
                  "controller-uid": job["metadata"]["uid"]}
        spec = copy.deepcopy(template["spec"])
        spec["hostname"] = f"{job['metadata']['name']}-{completion}"
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{job['metadata']['name']}-{completion}-{suffix}", "namespace": self.namespace,
                            "labels": labels,
                            "annotations": {"batch.kubernetes.io/job-completion-index": str(completion)},
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                                 "name": job["metadata"]["name"], "uid": job["metadata"]["uid"],
                                                 "controller": True, "blockOwnerDeletion": True}]},
               "spec": spec,
               "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
                          "containerStatuses": [{"name": c["name"], "ready": False, "restartCount": 0,
                                                 "image": c.get("image", ""),
                                                 "state": {"waiting": {"reason": "ContainerCreating"}}}
                                                for c in spec.get("containers", [])]}}
        self.store.create(PODS, pod)

    def _set_pod(self, pod: dict, *, ready: bool, phase: str = "Running", restart: bool = False,
                 exit_code: int = 1, reason: str = "Error") -> None:
        status = pod["status"]
        status["phase"] = phase
        status["conditions"] = [{"type": "PodScheduled", "status": "True"},
                                {"type": "Ready", "status": "True" if ready else "False",
                                 "lastTransitionTime": self._now()}]
        for cs in status["containerStatuses"]:
            cs["ready"] = ready
            if restart:
                cs["restartCount"] += 1
                cs["lastState"] = {"terminated": {"exitCode": exit_code, "reason": reason,
                                                  "finishedAt": self._now()}}
                self.store.restart_log(self.namespace, pod["metadata"]["name"], cs["name"])
            if phase == "Running":
                cs["state"] = ({"running": {"startedAt": self._now()}} if ready or not restart
                               else {"waiting": {"reason": "CrashLoopBackOff"}})
            else:
                cs["state"] = {"terminated": {"exitCode": 0 if phase == "Succeeded" else exit_code,
                                              "reason": "Completed" if phase == "Succeeded" else reason,
                                              "finishedAt": self._now()}}
        self.store.put(PODS, pod)

    def _refresh_job(self, job_name: str) -> None:
        job = self.store.get(JOBS, self.namespace, job_name)
        if job is None:
            return
        pods = self.store.list(PODS, self.namespace, f"controller-uid={job['metadata']['uid']}")
        status = job["status"]
        status["active"] = sum(1 for p in pods if p["status"]["phase"] in ("Pending", "Running"))
        status["ready"] = sum(1 for p in pods if any(c["type"] == "Ready" and c["status"] == "True"
                                                     for c in p["status"]["conditions"]))
        status["succeeded"] = max(status.get("succeeded", 0),
                                  sum(1 for p in pods if p["status"]["phase"] == "Succeeded"))
        self.store.put(JOBS, job)

    def _refresh_jobset(self) -> None:
        js = self.jobset()
        rows = []
        for rjob in js["spec"]["replicatedJobs"]:
            mine = [j for j in self.jobs() if j["metadata"]["labels"][f"{JS}replicatedjob-name"] == rjob["name"]]

            def done(j: dict, kind: str) -> bool:
                return any(c["type"] == kind and c["status"] == "True" for c in j["status"].get("conditions") or [])

            expected = lambda j: min(j["spec"]["parallelism"], j["spec"]["completions"])  # noqa: E731
            rows.append({"name": rjob["name"],
                         "ready": sum(1 for j in mine if j["status"]["ready"] + j["status"]["succeeded"] >= expected(j)
                                      and not done(j, "Failed")),
                         "succeeded": sum(1 for j in mine if done(j, "Complete")),
                         "failed": sum(1 for j in mine if done(j, "Failed")),
                         "active": sum(1 for j in mine if j["status"]["active"] > 0),
                         "suspended": 0})
        js.setdefault("status", {})["replicatedJobsStatus"] = rows
        js["status"].setdefault("restarts", 0)
        self.store.put(JOBSETS, js)

    def _slice_pods(self, index: int, rjob: str = "worker") -> list[dict]:
        return self.pods(f"{JS}replicatedjob-name={rjob},{JS}job-index={index}")

    def _job_of(self, index: int, rjob: str = "worker") -> str:
        return f"{self.name}-{rjob}-{index}"

    # --- the script -----------------------------------------------------------------------------------------

    def run(self) -> None:
        """Every pod scheduled, started and ready."""
        for pod in self.pods():
            if pod["status"]["phase"] in ("Pending", "Running"):
                self._set_pod(pod, ready=True)
        for job in self.jobs():
            self._refresh_job(job["metadata"]["name"])
        self._refresh_jobset()

    def head_log(self, *lines: str) -> None:
        head = self.pods(f"{JS}replicatedjob-name=pathways-head")[0]
        self.store.append_log(self.namespace, head["metadata"]["name"], head["spec"]["containers"][0]["name"], *lines)

    def crash_slice(self, index: int, rjob: str = "worker", exit_code: int = 1) -> None:
        """The slice's containers exit and restart in place (restartPolicy OnFailure): not ready, restarts +1."""
        for pod in self._slice_pods(index, rjob):
            self._set_pod(pod, ready=False, restart=True, exit_code=exit_code)
        self._refresh_job(self._job_of(index, rjob))
        self._refresh_jobset()

    def recover_slice(self, index: int, rjob: str = "worker") -> None:
        for pod in self._slice_pods(index, rjob):
            self._set_pod(pod, ready=True)
        self._refresh_job(self._job_of(index, rjob))
        self._refresh_jobset()

    def exhaust_slice(self, index: int, rjob: str = "worker") -> None:
        """Restarts pass backoffLimit: the Job fails, then the JobSet restarts everything or fails."""
        job = self.store.get(JOBS, self.namespace, self._job_of(index, rjob))
        assert job is not None
        for pod in self._slice_pods(index, rjob):
            self._set_pod(pod, ready=False, phase="Failed")
        job["status"].update(active=0, ready=0, failed=job["status"]["failed"] + len(self._slice_pods(index, rjob)))
        self._set_conditions(job, self._condition("FailureTarget", "True", "BackoffLimitExceeded",
                                                  "Job has reached the specified backoff limit"),
                             self._condition("Failed", "True", "BackoffLimitExceeded",
                                             "Job has reached the specified backoff limit"))
        self.store.put(JOBS, job)
        self._refresh_jobset()
        js = self.jobset()
        policy = js["spec"].get("failurePolicy") or {}
        counted = int(js["status"].get("restartsCountTowardsMax", js["status"].get("restarts", 0)) or 0)
        if counted < int(policy.get("maxRestarts", 0)):
            self.restart_jobset()
        else:
            self._fail_jobset(f"jobset {self.name} job {job['metadata']['name']} failed: reached maximum number of "
                              f"restarts ({policy.get('maxRestarts', 0)})")

    def restart_jobset(self) -> None:
        """failurePolicy Recreate: every Job (and so every pod) is deleted and created again."""
        for job in self.jobs():
            self.store.delete(JOBS, self.namespace, job["metadata"]["name"])
        js = self.jobset()
        js["status"]["restarts"] = int(js["status"].get("restarts", 0)) + 1
        js["status"]["restartsCountTowardsMax"] = int(js["status"].get("restartsCountTowardsMax", 0)) + 1
        self.store.put(JOBSETS, js)
        self._create_jobs(attempt=js["status"]["restarts"])

    def _fail_jobset(self, message: str) -> None:
        js = self.jobset()
        self._set_conditions(js, self._condition("Failed", "True", "ReachedMaxRestarts", message))
        js["status"]["terminalState"] = "Failed"
        self.store.put(JOBSETS, js)
        self._kueue_conditions(self._condition("Finished", "True", "JobFinished", "Workload failed: " + message))

    def complete(self) -> None:
        for pod in self.pods():
            self._set_pod(pod, ready=False, phase="Succeeded")
        for job in self.jobs():
            job = self.store.get(JOBS, self.namespace, job["metadata"]["name"])
            assert job is not None
            job["status"].update(active=0, ready=0, succeeded=min(job["spec"]["parallelism"],
                                                                  job["spec"]["completions"]))
            self._set_conditions(job, self._condition("Complete", "True", "CompletionsReached", ""))
            self.store.put(JOBS, job)
        self._refresh_jobset()
        js = self.jobset()
        self._set_conditions(js, self._condition("Completed", "True", "AllJobsCompleted", "jobset completed successfully"))
        js["status"]["terminalState"] = "Completed"
        self.store.put(JOBSETS, js)
        self._kueue_conditions(self._condition("Finished", "True", "JobFinished", "Job finished successfully"))

    def crash_pod(self, pod_name: str, exit_code: int = 1, reason: str = "Error") -> None:
        """One pod's container exits with `exit_code` and restarts in place (not ready until `heal`)."""
        pod = self.store.get(PODS, self.namespace, pod_name)
        assert pod is not None, pod_name
        self._set_pod(pod, ready=False, restart=True, exit_code=exit_code, reason=reason)
        self._refresh_job(pod["metadata"]["labels"]["batch.kubernetes.io/job-name"])
        self._refresh_jobset()

    def disrupt_pod(self, pod_name: str, reason: str = "EvictionByEvictionAPI", node: str = "") -> None:
        """What an eviction or a node loss leaves: a DisruptionTarget condition, the container killed
        by SIGTERM (143), the pod Failed (the Job controller replaces it on `reconcile` once it is gone)."""
        pod = self.store.get(PODS, self.namespace, pod_name)
        assert pod is not None, pod_name
        if node:
            pod["spec"]["nodeName"] = node
        self._set_pod(pod, ready=False, phase="Failed", exit_code=143)
        pod["status"]["conditions"].append(
            {"type": "DisruptionTarget", "status": "True", "reason": reason, "lastTransitionTime": self._now(),
             "message": {"EvictionByEvictionAPI": "Eviction API: evicting",
                         "PreemptionByScheduler": "Kube-scheduler: preempting",
                         "DeletionByTaintManager": "Taint manager: deleting due to NoExecute taint"}.get(reason, "")})
        self.store.put(PODS, pod)

    def evict_workload(self, message: str = "Preempted to accommodate a higher priority Workload") -> None:
        """Kueue evicts the workload (preemption by a higher-priority one)."""
        self._kueue_conditions(self._condition("Evicted", "True", "Preempted", message),
                               self._condition("Preempted", "True", "InClusterQueue", message))

    def heal(self) -> None:
        """The Job controller and the kubelet catch up: `reconcile`, and containers restarted in place run
        and are ready again."""
        self.reconcile()
        for pod in self.pods():
            if pod["status"]["phase"] == "Running" and not all(c["ready"] for c in pod["status"]["containerStatuses"]):
                self._set_pod(pod, ready=True)
        for job in self.jobs():
            self._refresh_job(job["metadata"]["name"])
        self._refresh_jobset()

    def reconcile(self) -> None:
        """One pass of the Job controller: pending pods start; deleted pods count as failed and are replaced."""
        for pod in self.pods():
            if pod["status"]["phase"] == "Pending":
                self._set_pod(pod, ready=True)
        for job in self.jobs():
            if any(c["type"] == "Failed" and c["status"] == "True" for c in job["status"].get("conditions") or []):
                continue
            pods = self.store.list(PODS, self.namespace, f"controller-uid={job['metadata']['uid']}")
            present = {int(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]) for p in pods}
            wanted = min(job["spec"]["parallelism"], job["spec"]["completions"])
            missing = [i for i in range(wanted) if i not in present]
            if missing:
                job["status"]["failed"] = job["status"]["failed"] + len(missing)
                self.store.put(JOBS, job)
                for completion in missing:
                    self._create_pod(job, completion)
            self._refresh_job(job["metadata"]["name"])
        self._refresh_jobset()

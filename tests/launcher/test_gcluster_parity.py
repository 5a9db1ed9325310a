"""gcluster's renders (issue #32 item 2): elxpk's render of the same command against gcluster's own, field by field.

gcluster_renders/ holds what gcluster v1.95.0 renders for each case of gcluster_cases.py (its capture.py says
how it was made); the case also names elxpk's equivalent command in xpk's spellings. Every field must be equal
once both sides are read as the API server reads them (NORMALISED below), except the deliberate differences of
DIFFERENCES, each documented in docs/gcluster.md; a difference listed for a case that no longer differs in that
case fails too, so the list stays true.
"""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.launcher.gcluster_cases import CASES, FAILURES, GCLUSTER_CLUSTER, GCLUSTER_COMMIT, GCLUSTER_VERSION
from tests.launcher.manifest_fields import differing, flatten

RENDERS = Path(__file__).with_name("gcluster_renders")
KINDS = {"tpu-v6e-16x2": "tpu", "pathways-v5litepod-16x3": "pathways", "elastic-v5litepod-16x3": "pathways",
         "headless-v5p-16x2": "headless", "gpu-a3-highgpu-8g": "gpu"}
TPU, PATHWAYS, ONE_JOB = {"tpu", "pathways", "headless"}, {"pathways", "headless"}, {"tpu", "gpu"}
ALL = TPU | {"gpu"}
HEAD = "spec.replicatedJobs[pathways-head].template.spec.template.spec"

# pattern (`*`: anything; a path matches when it starts with it) -> (the kinds of case it differs in, why).
# docs/gcluster.md lists the same, under "Deliberate differences".
DIFFERENCES: dict[str, tuple[set[str], str]] = {
    "metadata.namespace": (ALL, "elxpk names the namespace it was given; gcluster leaves it to kubectl"),
    "*labels.xpk.google.com/workload": (ALL, "elxpk's list, status and delete select on xpk's workload label"),
    "*labels.gcluster.google.com/workload": (ALL, "gcluster's own workload label"),
    "spec.suspend": (ALL, "explicit false, as every elxpk JobSet"),
    "spec.failurePolicy.rules": (ALL, "elxpk's failure classification: user errors fail, infrastructure restarts"),
    "*.podFailurePolicy": (ALL - {"headless"}, "elxpk's failure classification (the trainer's exit-code table)"),
    "*.priorityClassName": (ALL, "elxpk's default priority is xpk's `medium`; gcluster leaves the cluster's"),
    "*.affinity": (ALL, "gcluster keeps pods off `default-pool`; elxpk's nodeSelector already names accelerators"),
    "*.imagePullPolicy": (ALL, "Always, as xpk renders it; gcluster leaves Kubernetes' default"),
    "spec.network": (ONE_JOB, "elxpk asks JobSet for the pod DNS names the coordinator address needs"),
    "spec.failurePolicy.restartStrategy": (ONE_JOB, "explicit Recreate, JobSet's default"),
    "spec.replicatedJobs[slice-job].template.spec.completionMode": (ONE_JOB, "explicit Indexed, JobSet's default"),
    "metadata.annotations.alpha.jobset.sigs.k8s.io/exclusive-topology":
        ({"tpu", "gpu"}, "gcluster puts one-slice-per-node-pool on the JobSet; elxpk on each replicatedJob"),
    "spec.replicatedJobs[*].template.metadata.annotations.alpha.jobset.sigs.k8s.io/exclusive-topology":
        (TPU, "elxpk keeps each TPU slice on a node pool of its own; gcluster's Pathways workers do not ask"),
    "*.annotations.cloud.google.com/gke-tpu-slice-topology":
        (TPU, "gcluster's annotation of the slice topology; elxpk selects it by nodeSelector, as xpk"),
    "*.tolerations[google.com/tpu].effect": (TPU, "elxpk tolerates the TPU taint of any effect, as xpk"),
    "*.ports[": (TPU, "elxpk names the protocol (TCP, the API server's default) and xpk's TPU ports"),
    "*.containers[jax-tpu].command": ({"tpu", "pathways"}, "elxpk's command wrapper (SIGTERM forwarded, exit code "
                                                           "kept); gcluster's `/bin/bash -c`"),
    "*.containers[jax-tpu].env[": ({"tpu", "pathways"}, "the env every elxpk workload carries (ELXPK_*, "
                                                        "MEGASCALE_*, the Pathways proxy address)"),
    "*.containers[jax-tpu].securityContext": ({"tpu", "pathways"}, "privileged, as xpk renders TPU containers"),
    "*.containers[jax-tpu].volumeMounts": ({"tpu", "pathways"}, "xpk's /dev/shm, and the head's shared /tmp"),
    "*.volumes[dshm]": (ONE_JOB, "xpk's in-memory /dev/shm"),
    f"{HEAD}.containers[jax-tpu].resources": ({"pathways"}, "xpk's limits for the user container on the head"),
    f"{HEAD}.terminationGracePeriodSeconds": ({"pathways"}, "explicit 30 s, the default; the trainer saves on it"),
    "*[pathways-proxy].env[PATHWAYS_HEAD]": (PATHWAYS, "elxpk defines the variable the proxy's args name; "
                                                       "gcluster's `$(PATHWAYS_HEAD)` is left unexpanded"),
    "*[pathways-proxy].resources.limits.memory": (PATHWAYS, "xpk's 100G; gcluster's 100Gi"),
    "*[pathways-rm].resources.limits.memory": (PATHWAYS, "xpk's 32G; gcluster's 32Gi"),
    "*[pathways-rm].volumeMounts[shared-tmp]": (PATHWAYS, "gcluster mounts the head's /tmp into the resource "
                                                          "manager; elxpk, as xpk, only into the user container"),
    "*[pathways-rm].args.--instance_type": (PATHWAYS, "xpk's Pathways instance types (tpuv5e:4x4); gcluster "
                                                       "passes --compute-type's prefix (ct5lp:4x4, v5litepod:4x4)"),
    "*[pathways-worker].env[TPU_MIN_LOG_LEVEL]": (PATHWAYS, "xpk's worker log levels; gcluster's only with --verbose"),
    "*[pathways-worker].env[TF_CPP_MIN_LOG_LEVEL]": (PATHWAYS, "as TPU_MIN_LOG_LEVEL"),
    "*.containers[gpu-image].command": ({"gpu"}, "elxpk's command wrapper; gcluster's `/bin/bash -c`"),
    "*.containers[gpu-image].env[": ({"gpu"}, "xpk's GPU env (coordinator address, NODE_RANK, NNODES, GPUDirect) "
                                              "and elxpk's"),
    "*.containers[gpu-image].securityContext": ({"gpu"}, "privileged, as xpk renders GPU containers"),
    "*.containers[gpu-image].volumeMounts": ({"gpu"}, "xpk's /dev/shm, NVIDIA libraries and GPUDirect socket"),
    "*.annotations.devices.gke.io/": ({"gpu"}, "xpk's GPUDirect-TCPX devices for A3 High (docs/gpu.md); "
                                              "gcluster leaves GPU networking to the cluster blueprint"),
    "*.annotations.networking.gke.io/": ({"gpu"}, "xpk's GPUDirect-TCPX interfaces for A3 High"),
    "*.initContainers[tcpx-daemon]": ({"gpu"}, "xpk's GPUDirect-TCPX daemon for A3 High"),
    "*.volumes[": ({"gpu"}, "the GPUDirect-TCPX volumes (NVIDIA libraries, /proc/sys, /sys, the socket)"),
    "*.hostNetwork": ({"gpu"}, "gcluster puts GPU pods on the host network; elxpk, as xpk, gives A3 High its "
                               "GPUDirect-TCPX interfaces instead"),
    "*.tolerations[nvidia.com/gpu]": ({"gpu"}, "xpk's GPU toleration (GKE adds one too)"),
    "*.tolerations[user-workload]": ({"gpu"}, "xpk's toleration of its user-workload taint"),
}


def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in text.split("*")))


PATTERNS = {text: _pattern(text) for text in DIFFERENCES}


def excused(path: str, kind: str) -> str | None:
    """The listed difference that covers this path in a case of this kind (the first that matches)."""
    return next((text for text, pattern in PATTERNS.items() if kind in DIFFERENCES[text][0] and pattern.match(path)),
                None)


def _user_container(pod: dict[str, Any]) -> str | None:
    return next((c["name"] for c in pod.get("containers") or [] if not c["name"].startswith("pathways-")), None)


def normalised(doc: dict[str, Any], names_from: dict[str, Any] | None = None) -> dict[str, Any]:
    """The render as the API server reads it, under elxpk's names:
    - gcluster's `main-job` is elxpk's `slice-job`, its `workload-container` elxpk's user container (names_from);
    - a null field is an absent one (gcluster's empty `env:` and pod `metadata:`);
    - a resource quantity written as a number is the same quantity as a string;
    - `--flag=value` args are keyed by flag, so a difference names the flag."""
    doc = copy.deepcopy(doc)
    theirs_by_job = {j["name"]: j for j in (names_from or {}).get("spec", {}).get("replicatedJobs", [])}
    for job in doc["spec"]["replicatedJobs"]:
        if names_from is not None and job["name"] == "main-job":
            job["name"] = "slice-job"
        pod = job["template"]["spec"]["template"]["spec"]
        ours = theirs_by_job.get(job["name"])
        box = _user_container(ours["template"]["spec"]["template"]["spec"]) if ours else None
        for container in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
            if names_from is not None and container["name"] == "workload-container" and box:
                container["name"] = box
            if container.get("args"):
                container["args"] = {a.split("=", 1)[0]: a for a in container["args"]}
            resources = container.get("resources") or {}
            if resources.get("limits"):
                resources["limits"] = {k: str(v) for k, v in resources["limits"].items()}
    return _without_nulls(doc)


def _without_nulls(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_without_nulls(i) for i in node]
    return node


def ours(name: str, cli, spelling: str = "gcluster") -> dict[str, Any]:
    """elxpk's render of the case, from gcluster's own command line (`gcluster job submit` replaced by
    `elxpk workload create`) or, with spelling="xpk", from the same workload in xpk's spellings."""
    argv = CASES[name].gcluster if spelling == "gcluster" else CASES[name].elxpk
    result = cli("workload", "create", *argv, "--dry-run")
    assert result.code == 0, result.err
    return yaml.safe_load(result.out)


def theirs(name: str) -> dict[str, Any]:
    return yaml.safe_load((RENDERS / f"{name}.yaml").read_text(encoding="utf-8"))


def compare(name: str, mine: dict[str, Any], gcluster: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """(the differences no listed one covers, the listed differences of this kind of case that no longer
    differ)."""
    diff = differing(flatten(normalised(mine)), flatten(normalised(gcluster, names_from=mine)))
    unexcused = {path: sides for path, sides in diff.items() if not excused(path, KINDS[name])}
    listed = {text for text, (kinds, _) in DIFFERENCES.items() if KINDS[name] in kinds}
    return unexcused, listed - {excused(path, KINDS[name]) for path in diff}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_render_matches_gclusters_field_by_field(name, cli):
    """gcluster's command runs unchanged under `elxpk workload create`, and renders what gcluster renders
    but for the listed differences; the xpk-spelled command of the same workload renders the same."""
    mine = ours(name, cli)
    unexcused, stale = compare(name, mine, theirs(name))
    assert unexcused == {}
    assert stale == set(), "listed as a difference of this case, but no longer one: drop it (and the doc)"
    assert mine == ours(name, cli, spelling="xpk")


def test_the_comparison_catches_a_changed_field_and_a_stale_excuse(cli):
    """The check is not vacuous: a field changed on either side fails it, and so does a listed difference
    made equal."""
    name = "elastic-v5litepod-16x3"
    mine, gcluster = ours(name, cli), theirs(name)
    gcluster["spec"]["replicatedJobs"][1]["template"]["spec"]["backoffLimit"] = 41
    mine["spec"]["ttlSecondsAfterFinished"] = 60
    mine["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["priorityClassName"] = None
    unexcused, stale = compare(name, mine, gcluster)
    assert set(unexcused) == {"spec.replicatedJobs[worker].template.spec.backoffLimit", "spec.ttlSecondsAfterFinished"}
    assert stale == {"*.priorityClassName"}


def test_every_render_names_its_gcluster_version_and_command():
    """The render's first line is the command that made it: the case table and the renders agree."""
    for name, command in {**{n: c.gcluster for n, c in CASES.items()}, **FAILURES}.items():
        first = (RENDERS / f"{name}.yaml").read_text(encoding="utf-8").splitlines()[0]
        argv = shlex.join(["job", "submit", *GCLUSTER_CLUSTER, *command])
        assert first == f"# gcluster {GCLUSTER_VERSION} ({GCLUSTER_COMMIT[:12]}): {argv}"


def test_every_deliberate_difference_is_in_the_doc():
    doc = (Path(__file__).parents[2] / "docs" / "gcluster.md").read_text(encoding="utf-8")
    assert [text for text in DIFFERENCES if f"`{text}`" not in doc] == []


def test_the_cases_cover_the_issues_shapes():
    """A plain TPU job, Pathways with and without elasticity, headless Pathways, one GPU machine."""
    assert sorted(KINDS.values()) == ["gpu", "headless", "pathways", "pathways", "tpu"] and set(KINDS) == set(CASES)
    assert "--pathways-elastic-slices=1" in CASES["elastic-v5litepod-16x3"].gcluster
    assert not any("elastic" in a for a in CASES["pathways-v5litepod-16x3"].gcluster)


def test_workload_validate_admits_gclusters_renders_as_the_cluster_does(cli):
    """tests/realcluster/test_gcluster_admission.py has the real API server and JobSet webhook admit every
    one of them; the offline check must agree."""
    files = [str(RENDERS / f"{name}.yaml") for name in sorted(CASES)]
    result = cli("workload", "validate", *files)
    assert result.code == 0, result.out + result.err


def test_workload_validate_refuses_gclusters_render_of_ml_auto_solutions_1369(cli):
    """gcluster's --restart-on-exit-codes on Pathways: a podFailurePolicy on workers that restart OnFailure.
    The cluster admits the JobSet and refuses the workers' Job (tests/realcluster/test_gcluster_admission.py);
    offline, validate names the field."""
    result = cli("workload", "validate", str(RENDERS / "pathways-restart-on-exit-codes.yaml"))
    assert result.code == 1
    assert ("spec.replicatedJobs[1].template.spec.template.spec.restartPolicy: Invalid value: 'OnFailure': "
            "only \"Never\" is supported when podFailurePolicy is specified") in result.out


def test_the_vendored_renders_are_exactly_the_commands_of_the_table():
    assert sorted(p.stem for p in RENDERS.glob("*.yaml")) == sorted([*CASES, *FAILURES])

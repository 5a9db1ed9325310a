"""GPU workloads (issue #24 item 1): elxpk's render against xpk's own, field by field.

tests/launcher/xpk_gpu holds what xpk 1.16.0 renders for each machine type (its capture.py says how it
was made). Every field must be equal, except the deliberate differences below, each documented in
docs/gpu.md; a difference listed here that no longer differs fails too, so the list stays true.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from elxpk.catalog import GPU_TYPES, lookup_gpu
from elxpk.create.checks import parse_create
from elxpk.create.render import render
from tests.launcher.manifest_fields import flatten

GOLDENS = Path(__file__).with_name("xpk_gpu")
JOB = "spec.replicatedJobs[slice-job].template.spec"
POD = f"{JOB}.template.spec"
BOX = f"{POD}.containers[gpu-image]"

# path prefix -> why elxpk differs (docs/gpu.md, "Deliberate differences from xpk").
DIFFERENCES = {
    "metadata.namespace": "elxpk names the namespace it was given",
    "spec.network": "elxpk asks JobSet for the pod DNS names the coordinator address needs, explicitly",
    "spec.suspend": "as every elxpk JobSet",
    "spec.failurePolicy.restartStrategy": "elxpk's failure classification",
    "spec.failurePolicy.rules": "elxpk's failure classification",
    f"{JOB}.podFailurePolicy": "elxpk's failure classification (the trainer's exit-code table)",
    f"{JOB}.completionMode": "explicit Indexed (JobSet's default), which NODE_RANK relies on",
    f"{JOB}.template.metadata.annotations.kueue.x-k8s.io/podset-preferred-topology":
        "xpk adds it after asking the cluster whether Kueue has topology-aware scheduling; elxpk renders offline",
    f"{POD}.nodeSelector": "elxpk selects the GPU node pools itself; xpk leaves it to Kueue's ResourceFlavor",
    f"{POD}.imagePullSecrets": "xpk renders a secret named None when no --docker-image-pull-secret is given",
    f"{BOX}.command": "elxpk's command wrapper (SIGTERM forwarded, exit code kept)",
    f"{BOX}.env[ELXPK_": "the trainer settings every elxpk workload carries",
}


def ours(device_type: str) -> dict[str, Any]:
    spec, *_ = parse_create(workload="gpu-run", device_type=device_type, num_nodes="2",
                           docker_image="gcr.io/p/img:1", command="python3 train.py", namespace="default")
    return render(spec).objects[0]


def theirs(device_type: str) -> dict[str, Any]:
    return yaml.safe_load((GOLDENS / f"{device_type}.yaml").read_text(encoding="utf-8"))


def excused(path: str) -> str | None:
    return next((prefix for prefix in DIFFERENCES if path.startswith(prefix)), None)


@pytest.mark.parametrize("device_type", [g.name for g in GPU_TYPES])
def test_the_render_matches_xpks_field_by_field(device_type):
    mine, xpk = flatten(ours(device_type)), flatten(theirs(device_type))
    unexcused = {p: (mine.get(p, "<absent>"), xpk.get(p, "<absent>")) for p in sorted(set(mine) | set(xpk))
                 if mine.get(p, "<absent>") != xpk.get(p, "<absent>") and not excused(p)}
    assert unexcused == {}
    used = {excused(p) for p in set(mine) | set(xpk) if mine.get(p, "<absent>") != xpk.get(p, "<absent>")}
    assert set(DIFFERENCES) <= used  # no stale excuse


@pytest.mark.parametrize("device_type", [g.name for g in GPU_TYPES])
def test_the_env_comes_in_xpks_order(device_type):
    """Kubernetes expands $(NAME) only from the variables defined before it (JAX_COORDINATOR_ADDRESS reads
    JOBSET_NAME and REPLICATED_JOB_NAME), so the order of the env list matters, unlike other lists."""
    def names(jobset: dict[str, Any]) -> list[str]:
        box = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
        return [e["name"] for e in box["env"] if not e["name"].startswith("ELXPK_")]

    assert names(ours(device_type)) == names(theirs(device_type))


def test_every_golden_names_its_xpk_version_and_machine_type():
    for gpu in GPU_TYPES:
        first = (GOLDENS / f"{gpu.name}.yaml").read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# xpk 1.16.0: workload create") and f"--device-type {gpu.name} " in first


def test_what_differs_per_network_is_data_not_a_branch():
    """elxpk/create/gpu.py NETWORKS holds every per-network part; the template names no network and tests
    none (its only `if`s are on the failure rules, the service account and a loop's first sidecar)."""
    from elxpk.create.gpu import NETWORKS
    from elxpk.create.template_build import source

    text = source("gpu_multi_controller.yaml.j2")
    assert [line for line in text.splitlines() if "{% if" in line or "{% elif" in line] == [
        "{% if pod_failure_rules %}", "{% if spec.service_account is none %}",
        '{% elif spec.service_account != "default" %}', "{% if loop.first %}"]
    body = text.split("-#}", 1)[1]
    assert not [name for name in NETWORKS if f'"{name}"' in body] and "gpudirect ==" not in body


@pytest.mark.parametrize("spelling", ["a3-highgpu-8g", "H100-80GB-8", " h100-80gb-8 "])
def test_the_machine_type_and_any_case_name_the_same_gpu(spelling):
    assert lookup_gpu(spelling).name == "h100-80gb-8"

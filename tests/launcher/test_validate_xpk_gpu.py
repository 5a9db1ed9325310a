"""`workload validate` on what xpk renders for GPUs (tests/launcher/xpk_gpu): the API server prunes the null
`nodeSelector` and JobSet's webhook names the unnamed failure rule before the schema is checked, so both
pass there (tests/realcluster/test_gpu_submit.py asks the real ones) and must pass here."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from elxpk.admission.schema import CRDS, crds_dir

XPK_GPU = Path(__file__).with_name("xpk_gpu")
POD = ("spec", "replicatedJobs", 0, "template", "spec", "template", "spec")


def xpk_render(name: str = "h200-141gb-8") -> dict:
    return yaml.safe_load((XPK_GPU / f"{name}.yaml").read_text(encoding="utf-8"))


def pod(jobset: dict) -> dict:
    node = jobset
    for key in POD:
        node = node[key]
    return node


def test_xpks_gpu_renders_pass(cli):
    files = sorted(str(p) for p in XPK_GPU.glob("*.yaml"))
    assert len(files) == 4
    result = cli("workload", "validate", *files)
    assert result.code == 0, result.out + result.err


def test_no_field_of_the_vendored_crds_is_nullable():
    """What makes pruning every null field right (elxpk/admission/schema.py without_nulls)."""
    for crd_file, _ in CRDS.values():
        assert "nullable" not in (crds_dir() / crd_file).read_text(encoding="utf-8")


@pytest.mark.parametrize(("breaks", "words"), [
    (lambda js: pod(js)["containers"].append(None), "spec.replicatedJobs[0].template.spec.template.spec.containers[1]"),
    (lambda js: js["spec"]["failurePolicy"]["rules"][0].update(action="Explode"),
     "spec.failurePolicy.rules[0].action: Unsupported value"),
    (lambda js: pod(js).update(nodeSelector=["not", "a", "map"]),
     "spec.replicatedJobs[0].template.spec.template.spec.nodeSelector: type"),
], ids=["null-list-item", "bad-rule-action", "nodeSelector-list"])
def test_what_pruning_and_defaulting_do_not_excuse_is_still_refused(cli, tmp_path, breaks, words):
    jobset = copy.deepcopy(xpk_render())
    breaks(jobset)
    path = tmp_path / "jobset.yaml"
    path.write_text(yaml.safe_dump(jobset), encoding="utf-8")
    result = cli("workload", "validate", str(path))
    assert result.code == 1, result.out + result.err
    assert any(line.startswith(f"{path}: {words}") for line in result.out.splitlines()), result.out

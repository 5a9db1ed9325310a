"""Golden manifests: `elxpk workload create --dry-run` output, byte for byte, for fixed inputs.

Regenerate with `pytest tests/launcher --update-goldens` and review the diff. Every golden is also
checked against the JobSet CRD (unknown fields forbidden) and the Kubernetes core schemas.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.launcher.cases import CASES
from tests.launcher.conftest import GOLDENS


@pytest.mark.parametrize("name", sorted(CASES))
def test_dry_run_matches_golden(name, cli, update_goldens):
    result = cli("workload", "create", *CASES[name], "--dry-run")
    assert result.code == 0, result.err
    path = GOLDENS / f"{name}.yaml"
    if update_goldens:
        path.write_text(result.out, encoding="utf-8")
    assert path.exists(), f"missing golden {path}: run pytest tests/launcher --update-goldens"
    assert result.out == path.read_text(encoding="utf-8"), f"{name}: regenerate with --update-goldens and review"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_is_schema_valid(name, jobset_validator, core_validator):
    docs = list(yaml.safe_load_all((GOLDENS / f"{name}.yaml").read_text(encoding="utf-8")))
    assert [d["kind"] for d in docs] == ["JobSet"]
    assert jobset_validator(docs[0]) == []
    assert core_validator(docs[0]) == []


def test_json_output_is_the_same_object(cli):
    yaml_out = cli("workload", "create", *CASES["elastic-v5litepod-16x3"], "--dry-run").out
    json_out = cli("workload", "create", *CASES["elastic-v5litepod-16x3"], "--dry-run", "-o", "json")
    assert json_out.code == 0
    assert json.loads(json_out.out) == yaml.safe_load(yaml_out)


def test_strict_schema_catches_a_misplaced_field(jobset_validator):
    """The strict CRD check is not vacuous: a field the API server would prune is reported."""
    doc = yaml.safe_load((GOLDENS / "pathways-v5p-8.yaml").read_text(encoding="utf-8"))
    doc["spec"]["failurePolicy"]["maxRestart"] = 3
    doc["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]["imge"] = "x"
    errors = jobset_validator(doc)
    assert any("maxRestart" in e for e in errors)
    assert any("imge" in e for e in errors)


def test_core_schema_catches_a_bad_pod_field(core_validator):
    doc = yaml.safe_load((GOLDENS / "pathways-v5p-8.yaml").read_text(encoding="utf-8"))
    doc["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["restartPolicy"] = {"x": 1}
    assert core_validator(doc)

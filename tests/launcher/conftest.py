"""Launcher test fixtures: the JobSet CRD schema (strict), a Kubernetes core-schema check, and a CLI runner.

The CRD is loaded once per session with the C YAML loader and "strictified": every object schema that
lists properties and does not preserve unknown fields gets `additionalProperties: false`, so a typo'd
or misplaced field fails validation instead of being silently pruned by the API server.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from elxpk.cli.main import main
from tests.support.crd import strict_crd_schema

GOLDENS = Path(__file__).parent / "goldens"
KUBE_VERSION = "1.37.0"


@pytest.fixture(scope="session")
def jobset_validator(crd_dir: Path) -> Callable[[dict], list[str]]:
    """Validate a JobSet against the real CRD schema (v1alpha2), unknown fields forbidden; returns errors."""
    import jsonschema

    schema = strict_crd_schema(crd_dir / "jobset.x-k8s.io_jobsets.yaml")
    validator = jsonschema.Draft7Validator(schema)

    def errors(obj: dict) -> list[str]:
        return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator.iter_errors(obj)]

    return errors


def job_templates(jobset: dict) -> list[tuple[str, dict]]:
    """Each replicatedJob's Job, as a batch/v1 Job object for the core schemas."""
    return [
        (job["name"], {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job["name"]},
                       "spec": job["template"]["spec"]})
        for job in jobset["spec"]["replicatedJobs"]
    ]


@pytest.fixture(scope="session")
def core_validator() -> Callable[[dict], list[str]]:
    """kubernetes-validate (strict) on each replicatedJob's Job and pod template; returns errors."""
    import kubernetes_validate

    def errors(jobset: dict) -> list[str]:
        found = []
        for name, job in job_templates(jobset):
            try:
                kubernetes_validate.validate(job, KUBE_VERSION, strict=True)
            except kubernetes_validate.ValidationError as exc:
                found.append(f"{name}: {'/'.join(map(str, exc.path))}: {exc.message[:200]}")
        return found

    return errors


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith("error: ")]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run the real CLI entry point in-process: `cli("workload", "create", ...)` → code, stdout, stderr."""

    def run(*argv: str) -> CliResult:
        capsys.readouterr()
        code = main(list(argv))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run

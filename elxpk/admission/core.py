"""The Kubernetes core schemas (strict: unknown fields refused), from the kubernetes-validate package, for
each replicatedJob's Job template of a JobSet and for the other kinds a manifest may hold.

kubernetes-validate's own `validate()` stops at the first error; this reads its schemas and reports every
error, as the API server would. Imported only by `elxpk workload validate`.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from elxpk.admission.violation import Violation, join

_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]{0,62}")
_API_VERSION = re.compile(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?v[0-9]+((alpha|beta)[0-9]+)?")


class NoSchema(Exception):
    """kubernetes-validate has no schema for this apiVersion and kind (a CRD, or a typo)."""


@functools.cache
def kube_version() -> str:
    """The newest Kubernetes minor whose schemas kubernetes-validate ships."""
    from kubernetes_validate import utils

    return utils.latest_version()


@functools.lru_cache(maxsize=32)
def _validator(api_version: str, kind: str) -> Any:
    import jsonschema
    from kubernetes_validate import utils
    from referencing import Registry, Resource

    # The names become a file name: only well-formed ones (no '/', no '..', no length attack) get that far.
    if not _KIND.fullmatch(kind) or not _API_VERSION.fullmatch(api_version):
        raise NoSchema(f"{api_version} {kind}")
    version = kube_version()
    directory = f"kubernetes-json-schema/v{version}-local-strict"
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)  # as kubernetes-validate names files
    try:
        schema = utils.schema_contents(f"{directory}/{kind.lower()}-{group}.json", version)
    except (OSError, utils.VersionNotSupportedError) as exc:
        raise NoSchema(f"{api_version} {kind}") from exc
    definitions = _definitions(directory, version)
    registry = definitions @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


@functools.cache
def _definitions(directory: str, version: str) -> Any:
    from kubernetes_validate import utils
    from referencing import Resource

    return Resource.from_contents(utils.schema_contents(f"{directory}/_definitions.json", version))


def _message(error: Any) -> str:
    message = error.message
    if error.validator == "additionalProperties":
        return f"unknown field: {message.split('(')[-1].rstrip(')')}"
    if len(message) > 160:
        text = repr(error.instance)
        return f"{error.validator}: {text if len(text) <= 80 else text[:77] + '...'}"
    return message


def core_problems(obj: dict, prefix: str = "") -> list[Violation]:
    """Every schema error of a core object (Job, Service, ConfigMap, ...), with field paths under `prefix`.
    Raises NoSchema for a kind the core schemas do not know."""
    validator = _validator(str(obj.get("apiVersion")), str(obj.get("kind")))
    found = []
    for error in validator.iter_errors(obj):
        path = prefix
        for part in error.absolute_path:
            path = join(path, part)
        found.append(Violation(path or "<root>", _message(error)))
    return sorted(set(found))


def job_template_core_problems(jobset: dict) -> list[Violation]:
    """Each replicatedJob's template as the batch/v1 Job the JobSet controller will create, against the core
    Job and pod schemas; paths point back into the JobSet."""
    found = []
    rjobs = jobset.get("spec", {}).get("replicatedJobs") if isinstance(jobset.get("spec"), dict) else None
    for i, rjob in enumerate(rjobs if isinstance(rjobs, list) else []):
        template = rjob.get("template") if isinstance(rjob, dict) else None
        if not isinstance(template, dict):
            continue
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": template.get("metadata") or {},
               "spec": template.get("spec")}
        base = join(join("spec.replicatedJobs", i), "template")
        for violation in core_problems(job):
            if violation.path.startswith(("spec", "metadata")):
                found.append(Violation(f"{base}.{violation.path}", violation.message))
    return found

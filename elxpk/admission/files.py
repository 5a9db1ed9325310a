"""`elxpk workload validate FILE...`: the checks a cluster would make on a manifest, offline.

Each YAML document is checked by kind:
- JobSet: the vendored CRD schema (strict, int32/int64 formats enforced), the admission rules of
  `elxpk.admission.check_jobset`, and each replicatedJob's template against the core Job and pod schemas;
- PathwaysJob: its vendored CRD schema and object meta;
- any other kind the core schemas know (Service, ConfigMap, ...): its core schema (strict) and object meta;
- anything else is skipped, with a note.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from elxpk import admission
from elxpk.admission import core, objectmeta, schema
from elxpk.admission.object_size import size_problem
from elxpk.admission.violation import Violation
from elxpk.admission.webhook import defaulted
from elxpk.bounded_read import (
    MANIFEST_BYTES,
    ReadRefused,
    decode_text,
    read_limited,
    read_stdin,
    yaml_values_problem,
)
from elxpk.errors import UsageError

STDIN = "-"
JOBSET_KIND = ("jobset.x-k8s.io/v1alpha2", "JobSet")
# A JobSet's findings from outside admission: (errors, each labelled with what found it, and warnings).
JobSetFindings = Callable[[dict], tuple[list[str], list[str]]]
MAX_NODES = 1_000_000  # a 200-slice JobSet has about 1,000


@dataclass
class Report:
    """What validating some files found: `lines` are `FILE: PATH: message`, `notes` are for stderr."""

    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # timeouts and budgets that work badly (stderr)
    budget_lines: int = 0  # of `lines`, the timeouts and budgets that cannot work
    documents: int = 0  # objects looked at (a List's items each count)
    skipped: int = 0  # of them, those of a kind with no schema known: not checked


def read_documents(name: str) -> list[Any]:
    """The YAML documents of a file (or stdin for `-`); UsageError (exit 2) when it cannot be read or parsed."""
    import yaml


    try:
        data = read_stdin(limit=MANIFEST_BYTES) if name == STDIN else read_limited(name, limit=MANIFEST_BYTES)
        text = decode_text(data, "YAML")
    except (FileNotFoundError, ReadRefused) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(f"{name}: cannot read it ({reason}); give a readable YAML file, or - for stdin") from None
    too_many = yaml_values_problem(text)
    if too_many:
        raise UsageError(f"{name}: {too_many} (a large manifest holds a few thousand); check what produced it, "
                         "or split it")
    try:
        documents = list(yaml.load_all(text, Loader=strict_loader()))
    except RecursionError:
        raise UsageError(f"{name}: nested too deeply to be a manifest; check what produced it") from None
    except ValueError as exc:  # a constructor's own failure, e.g. an integer of thousands of digits
        raise UsageError(f"{name}: not valid YAML ({(str(exc).splitlines() or ['bad value'])[0]}); fix the "
                         "file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"{name}: not valid YAML{where} ({problem}); fix the file") from exc
    documents = [d for d in documents if d is not None]
    if _too_big(documents):  # e.g. a "billion laughs" of YAML aliases: every check walks the expanded tree
        raise UsageError(f"{name}: more than {MAX_NODES} values once YAML aliases are expanded; a manifest "
                         f"is far smaller, so check what produced it")
    return documents


def strict_loader() -> Any:
    """PyYAML's safe loader (the C one when built) refusing a key given twice in one mapping, as kubectl and
    the API server do (sigs.k8s.io/yaml: `key "x" already set in map`); PyYAML alone keeps the last.
    Keys merged in with `<<` may be overridden, as in YAML 1.1."""
    global _STRICT_LOADER
    if _STRICT_LOADER is None:
        import yaml

        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

        class StrictLoader(base):  # type: ignore[misc, valid-type]
            def construct_mapping(self, node: Any, deep: bool = False) -> Any:
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        duplicate = key in seen
                    except TypeError:
                        continue  # unhashable: the base class says so
                    if duplicate:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping", node.start_mark, f"duplicate key {key!r}",
                            key_node.start_mark)
                    seen.add(key)
                return super().construct_mapping(node, deep=deep)

        _STRICT_LOADER = StrictLoader
    return _STRICT_LOADER


_STRICT_LOADER: Any = None


def expand_lists(documents: list[Any]) -> list[tuple[str, Any]]:
    """(where, object) of each document, a `kind: List` replaced by its items as kubectl does."""
    out: list[tuple[str, Any]] = []
    for number, obj in enumerate(documents, start=1):
        where = "" if len(documents) == 1 else f"document {number}"
        if isinstance(obj, dict) and obj.get("kind") == "List" and obj.get("apiVersion") == "v1":
            items = obj.get("items")
            if not isinstance(items, list):
                out.append((where, {"kind": "List", "apiVersion": "v1", "items": items}))
                continue
            for index, item in enumerate(items):
                out.append(((where + " " if where else "") + f"item {index}", item))
        else:
            out.append((where, obj))
    return out


def _too_big(documents: list[Any]) -> bool:
    """More than MAX_NODES values, counting shared (aliased) values once per reference, as the checks do."""
    stack, seen = list(documents), 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            return True
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _short(value: str) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def document_problems(obj: Any) -> tuple[list[Violation], str | None]:
    """The violations of one document, and a note when its kind was skipped."""

    if not isinstance(obj, dict):
        return [Violation("<root>", f"not a Kubernetes object (a YAML {type(obj).__name__})")], None
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if (api_version, kind) == ("v1", "List"):  # expand_lists leaves only a List without a list of items
        return [Violation("items", "Required value: a List holds its objects in a list under items")], None
    if not api_version or not kind or not isinstance(api_version, str) or not isinstance(kind, str):
        return [Violation("<root>", "Required value: apiVersion and kind are required")], None
    if (api_version, kind) in schema.CRDS:
        obj = schema.without_nulls(obj)  # as the API server prunes them, before anything else looks
    if (api_version, kind) == admission.JOBSET:
        found = (schema.schema_problems(defaulted(obj)) + admission.check_jobset(obj)
                 + core.job_template_core_problems(obj))
    elif (api_version, kind) in schema.CRDS:
        found = schema.schema_problems(obj) + objectmeta.object_meta_problems(obj.get("metadata"))
    elif kind in {k for _, k in schema.CRDS}:
        # A known kind under an apiVersion its CRD does not serve: the API server has no such resource (404);
        # say which one it serves (apiextensions-apiserver customresource/validator.go ValidateTypeMeta).
        served = sorted(v for v, k in schema.CRDS if k == kind)
        return [Violation("apiVersion", f"Unsupported value: {_short(api_version)}: {kind} is served as "
                                        f"{', '.join(served)}")], None
    elif api_version in {v for v, _ in schema.CRDS}:
        served = sorted(k for v, k in schema.CRDS if v == api_version)
        return [Violation("kind", f"Unsupported value: {_short(kind)}: {api_version} serves "
                                  f"{', '.join(served)}")], None
    else:
        try:
            found = core.core_problems(obj)
        except core.NoSchema:
            return [], f"apiVersion {_short(api_version)}, kind {_short(kind)}: no schema known to elxpk, skipped"
        found += objectmeta.object_meta_problems(obj.get("metadata"), namespaced=kind != "Namespace")

    too_big = size_problem(obj)
    if too_big:
        found.append(Violation("<root>", f"Too large: the object {too_big}"))
    return sorted(set(found), key=lambda v: (v.path, v.message)), None


def _is_jobset(obj: Any) -> bool:
    """A document that says it is a JobSet (of any apiVersion: a wrong one is the checks' to report)."""
    return isinstance(obj, dict) and obj.get("kind") == JOBSET_KIND[1]


def _is_workload(obj: Any) -> bool:
    """A JobSet or a PathwaysJob (the kinds whose vendored CRDs this checks), of any apiVersion."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    # `kind: []` is YAML a file may hold: only a string names a kind (a list is unhashable, no set holds it)
    return isinstance(kind, str) and kind in {k for _, k in schema.CRDS}


def no_jobset(name: str, expanded: list[tuple[str, Any]]) -> str:
    """The line for a file that holds no JobSet: what it holds instead, and the fix."""
    kinds = sorted({str(o.get("kind")) if isinstance(o, dict) and o.get("kind") else "no kind"
                    for _, o in expanded})
    holds = f"only {', '.join(_short(k) for k in kinds[:5])}" if kinds else "no object: empty, only comments and ---, " \
        "or an empty List"
    return (f"{name}: no JobSet (or PathwaysJob) in it ({holds}); give the JobSet manifest, e.g. what `elxpk workload create "
            "... --dry-run > jobset.yaml` writes when it succeeds")


def validate_files(names: list[str], jobset_findings: JobSetFindings | None = None) -> Report:
    """Check every document of every file. Reads all files first: one unreadable file is exit 2, before
    anything is reported. `jobset_findings` adds the checks of another stage to each JobSet (the CLI passes
    the timeout and budget rules of elxpk/create/budget_checks.py and what the trainer would refuse,
    elxpk/create/trainer_refusals.py): its errors are lines, its warnings warnings."""
    if names.count(STDIN) > 1:
        raise UsageError("-: stdin can be read once; name it once")
    loaded = [(name, expand_lists(read_documents(name))) for name in names]
    missing = [no_jobset(name, expanded) for name, expanded in loaded
               if not any(_is_workload(o) for _, o in expanded)]
    if missing:  # an empty file (a failed render's output) is not a JobSet that passes: nothing is reported
        raise UsageError(*missing)
    report = Report()
    for name, expanded in loaded:
        for part, obj in expanded:
            where = f"{name} ({part})" if part else name
            found, note = document_problems(obj)
            report.documents += 1
            if note:
                report.skipped += 1
                report.notes.append(f"{where}: {note}")
            report.lines += [f"{where}: {violation}" for violation in found]
            if jobset_findings and _is_jobset(obj):
                errors, warnings = jobset_findings(obj)
                report.lines += [f"{where}: {line}" for line in errors]
                report.budget_lines += len(errors)
                report.warnings += [f"{where}: {line}" for line in warnings]
    return report


"""gcluster's spellings of `workload create` (Cluster Toolkit's `gcluster job submit`, issue #32): which
dialect a command speaks, and its flags in elxpk's own keys.

Each gcluster spelling is declared once in the flag table (elxpk/create/flags.py): an `Alias` of the row
whose quantity it is (`--restarts` of `--max-restarts`), or a row of its own where elxpk has no such
flag (`--compute-type`, `--pathways`). A command that uses any gcluster spelling speaks gcluster: it gets
gcluster's defaults (`--restarts` 1, `--grace-period` 30s, `--gke-ttl-after-finished` 1h, a plain JobSet
unless `--pathways`) and limits (names of at most 28 characters, 22 for Pathways; `--pathways-*` only
with `--pathways`), because a gcluster user's command must mean here what it meant there. Both
spellings of one quantity in one command is exit 2 naming both. Standard library only (the table is read
on every `workload create --dry-run`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from elxpk.catalog import (
    TpuType,
    UnknownGpuType,
    UnknownTpuType,
    find,
    is_machine_type,
    lookup,
    lookup_gpu,
    lookup_machine,
)
from elxpk.create.flags import ALIASES, BY_NAME, FLAGS
from elxpk.flag_rows import DURATION, GCLUSTER, Alias, Flag, merge_aliases
from elxpk.flag_rows import given_value as _given
from elxpk_contract.spelling import Spelling

NAME_LIMIT = 28  # gcluster cmd/job/submit.go: "workload name cannot exceed 28 characters"
PATHWAYS_NAME_LIMIT = 22  # `<name>-pathways-head-0-0.<name>` must fit a 63-character hostname
_GCLUSTER_ROWS = tuple(f.name for f in FLAGS if f.dialect == GCLUSTER)
# --timeout's text as a duration (a leading `-` is gcluster's "forever", taken off first).
# A gcluster command names its machine with --compute-type: the line that asks for it.
_ASK_MACHINE = "--compute-type: required; e.g. --compute-type v6e-16, or a GPU machine such as h100-mega-80gb-8"
_TIMEOUT = BY_NAME["timeout"]._replace(kind=DURATION, default=None,
                                       fix="a duration such as 1h or 10m (negative: forever)")


class Dialect(NamedTuple):
    """What a command's spelling decides besides the rows' values."""

    name: str = ""  # GCLUSTER, or "" (elxpk's and xpk's spellings)
    namespace: str | None = None  # --gke-namespace
    await_completion: bool = False  # --await-job-completion
    timeout: str | None = None  # --timeout as `workload wait` takes it; None waits forever
    print_manifest: bool = True  # False with --dry-run-out: gcluster writes the file and prints nothing
    spoken: Spelling = Spelling()  # how the command spells the rows: the checks' messages name them so


def speaks_gcluster(flags: Mapping[str, Any]) -> bool:
    return any(_given(flags.get(key)) for key in (*ALIASES, *_GCLUSTER_ROWS))


def resolve(flags: Mapping[str, Any], *, namespace_given: bool = False) -> tuple[dict[str, Any], Dialect, list[str]]:
    """`flags` (the rows' keys, the aliases' keys and gcluster's rows) as elxpk's rows' keys only, the
    Dialect, and one line per problem."""
    gcluster = speaks_gcluster(flags)
    problems: list[str] = []  # the aliases' readings' problems first, then both spellings given
    out, both = merge_aliases(ALIASES, {k: v for k, v in flags.items() if k not in _GCLUSTER_ROWS},
                              read=lambda row, alias, value: _read(row, alias, value, problems))
    problems += both
    _tpu_device_type(out)
    for key, (row, alias) in ALIASES.items():  # gcluster's defaults, where neither spelling was given
        if gcluster and alias.default is not None and not _given(flags.get(key)) and not _given(flags.get(row.name)):
            out[row.name] = _read(row, alias, alias.default, problems)
    if not gcluster:
        return out, Dialect(), problems
    pathways = bool(flags.get("pathways"))
    if pathways and flags.get("no_pathways"):
        problems.append("--pathways and --no-pathways: pick one")
    out["no_pathways"] = not pathways
    spellings = [(key, alias.spelling) for key, (_, alias) in ALIASES.items()] + [(f.name, f.flag) for f in FLAGS]
    for key, spelling in spellings:  # gcluster: "pathways flags specified but --pathways flag is missing"
        if spelling.startswith("--pathways-") and _given(flags.get(key)) and not pathways:
            problems.append(_needs_pathways(spelling))
    if pathways and not _given(flags.get("pathways_gcs_location")):
        problems.append("--pathways-gcs-location: required with --pathways (gcluster's rule: where Pathways keeps "
                        "its scratch files); e.g. --pathways-gcs-location gs://my-bucket/pathways-tmp")
    if flags.get("service_account") is None:  # gcluster names no ServiceAccount unless asked (xpk: xpk-sa on GPU)
        out["service_account"] = "default"
    problems += _name_limit(out.get("workload"), flags, pathways)
    problems += _compute_type(flags, out)
    dialect = Dialect(GCLUSTER, namespace=flags.get("gke_namespace"), await_completion=bool(flags.get(
        "await_job_completion")), timeout=_timeout(flags, problems), print_manifest=not _given(flags.get("dry_run_out")),
        spoken=_spoken(flags))
    if dialect.namespace is not None and namespace_given:
        problems.append("--gke-namespace and --namespace: one quantity in gcluster's and elxpk's spelling; give one")
    if _given(flags.get("dry_run_out")):
        out["dry_run"] = True
        if dialect.await_completion:
            problems.append("--await-job-completion and --dry-run-out: nothing is submitted with --dry-run-out; "
                            "drop one")
    return out, dialect, problems


def _tpu_device_type(out: dict[str, Any]) -> None:
    """xpk's --device-type names a TPU type too (`--device-type v5litepod-16`, xpk's `--tpu-type` and
    `--device-type` are one quantity): a TPU of the catalog given there is --tpu-type. A GPU machine, or a
    name the catalog does not have, stays --device-type (its row's check names the GPUs)."""
    device = out.get("device_type")
    if not isinstance(device, str) or _given(out.get("tpu_type")):
        return
    try:
        row = find(device)
    except UnknownTpuType:
        return
    if isinstance(row, TpuType):
        out["tpu_type"], out["device_type"] = device, None


def _spoken(flags: Mapping[str, Any]) -> Spelling:
    """How a gcluster command spells the rows, for the checks' messages (the contract's spelling context, elxpk_contract/spelling.py): a row
    by the alias the user typed, else by gcluster's spelling unless typed in elxpk's (a required row given in
    no spelling is asked for as `--name`, not --workload); the machine asked for as --compute-type, and not at
    all where a --compute-type given did not resolve (reported already); --no-pathways as implied unless
    typed (resolve said --pathways is needed)."""
    typed_rows = {row.name for row, _ in ALIASES.values() if _given(flags.get(row.name))}
    spellings = {row.name: alias.spelling for key, (row, alias) in ALIASES.items()
                 if _given(flags.get(key)) or row.name not in typed_rows}
    if _given(flags.get("gke_namespace")):  # the cluster's --namespace (not a row of the table), gcluster's way
        spellings["namespace"] = "--gke-namespace"
    asked = {"tpu_type": "" if _given(flags.get("compute_type")) else _ASK_MACHINE}
    return Spelling(spellings, asked, frozenset() if flags.get("no_pathways") else frozenset({"no_pathways"}))


def pathways_off(spelling: str) -> list[str]:
    """The line for a Pathways-only flag in a gcluster command without --pathways (Pathways is off, not
    --no-pathways typed): none for a --pathways-* spelling, which resolve() reported already."""
    return [] if spelling.startswith("--pathways-") else [_needs_pathways(spelling)]


def pathways_only(spelling: str, line: str, told: bool) -> list[str]:
    """A Pathways-only flag in a command without Pathways: `line`, elxpk's, where the user turned Pathways off
    (`told`: --no-pathways typed, or a GPU); else gcluster's (`pathways_off`)."""
    return [line] if told else pathways_off(spelling)


def _needs_pathways(spelling: str) -> str:
    return f"{spelling}: needs --pathways (gcluster renders a plain JobSet without it); add --pathways or drop the flag"


def _read(row: Flag, alias: Alias, value: Any, problems: list[str]) -> Any:
    """An alias's value as its row reads it: a duration (`--grace-period 2m`) as whole seconds, read by the
    rows' one reader (elxpk/flag_rows.py) under the alias's spelling, within the row's bounds."""
    if alias.kind != DURATION:
        return value
    seconds, problem = row._replace(kind=DURATION, spelling=alias.spelling, default=None,
                                    fix="a duration such as 30s, 10m or 1h").read(value)
    if problem:
        problems.append(problem)
        return None
    if seconds != int(seconds):
        problems.append(f"{alias.spelling} {value!r}: must be whole seconds; give e.g. 30s or 2m")
        return None
    return str(int(seconds))


def _name_limit(name: Any, flags: Mapping[str, Any], pathways: bool) -> list[str]:
    limit = PATHWAYS_NAME_LIMIT if pathways else NAME_LIMIT
    if not isinstance(name, str) or len(name) <= limit:
        return []
    spelling = "--name" if _given(flags.get("name")) else BY_NAME["workload"].flag
    why = " with --pathways (<name>-pathways-head-0-0.<name> must fit 63)" if pathways else ""
    return [f"{spelling} {name!r}: {len(name)} characters; gcluster's limit is {limit}{why}; shorten it"]


def _compute_type(flags: Mapping[str, Any], out: dict[str, Any]) -> list[str]:
    """--compute-type (and --topology) into --tpu-type or --device-type."""
    compute, topology = flags.get("compute_type"), flags.get("topology")
    if not _given(compute):
        return ["--topology: needs --compute-type (e.g. --compute-type ct6e-standard-4t --topology 4x4)"] \
            if _given(topology) else []
    for row in ("tpu_type", "device_type"):
        if _given(flags.get(row)):
            return [f"--compute-type and {BY_NAME[row].flag}: one quantity in gcluster's and elxpk's spelling; "
                    "give one"]
    text = str(compute)
    try:
        out["device_type"] = lookup_gpu(text).name
        if str(flags.get("num_slices")).strip() == "1":  # gcluster's one group of GPU nodes: elxpk's only shape
            out["num_slices"] = None
        return [f"--topology {topology!r}: a GPU machine has no topology; drop it"] if _given(topology) else []
    except UnknownGpuType:
        pass
    try:
        if is_machine_type(text):
            if not _given(topology):
                return [f"--compute-type {text!r}: a TPU machine type needs --topology (e.g. --topology 4x4)"]
            out["tpu_type"] = lookup_machine(text, str(topology)).name
            return []
        tpu = lookup(_xpk_name(text))
    except UnknownTpuType as exc:
        return [f"--compute-type {text!r}: {exc}; or a GPU machine such as h100-mega-80gb-8"]
    except ValueError as exc:
        return [f"--compute-type {text!r}: {exc}"]
    if _given(topology) and str(topology).strip().lower() != tpu.topology:
        return [f"--compute-type {text!r} --topology {topology!r}: gcluster's {text} is {tpu.topology}; drop "
                "--topology or make them agree"]
    out["tpu_type"] = tpu.name
    return []


def _xpk_name(shorthand: str) -> str:
    """gcluster's TPU shorthand as xpk's (the catalog's) name. gcluster counts chips after the dash where xpk
    counts TensorCores: the same for v5e and v6e (one core a chip), and for v4 (gcluster reads v4-N as
    cores, as xpk); its v5p-8 is xpk's v5p-16 (cluster-toolkit pkg/config/hardware.go parseShorthand)."""
    family, _, count = shorthand.strip().lower().rpartition("-")
    if family == "tpu7x" and count.isdigit():  # gcluster refuses it too
        raise ValueError("for TPU7x gcluster takes the topology, not a chip count: --compute-type "
                         "tpu7x-standard-4t --topology 2x2x2")
    return f"{family}-{2 * int(count)}" if family == "v5p" and count.isdigit() else shorthand


def _timeout(flags: Mapping[str, Any], problems: list[str]) -> str | None:
    raw = flags.get("timeout")
    if raw is None:
        return None
    if not flags.get("await_job_completion"):
        problems.append("--timeout: only with --await-job-completion (how long to wait); add it or drop --timeout")
        return None
    text = str(raw).strip()
    forever = text.startswith("-")  # gcluster's negative duration: wait forever
    # Read by its row as a duration (the one reader), the sign aside.
    seconds, problem = _TIMEOUT.read(text[1:] if forever else text)
    if problem:
        problems.append(problem.replace(f"{text[1:]!r}", f"{raw!r}", 1) if forever else problem)
        return None
    return None if forever or seconds == 0 else text

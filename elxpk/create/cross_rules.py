"""The rules of `workload create` that tie several flags together, as pure functions over the typed values
(each row already read by elxpk/flag_rows.py `read_all`): each returns what it decides and its error and
warning lines. elxpk/create/checks.py calls them and builds the spec.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from elxpk.create.dialect import pathways_only
from elxpk.create.flags import RESERVED_ENV, flag
from elxpk_contract.setting_rules import (
    LAUNCHER_DERIVED,
    cross_problems,
    env_name,
    exposed,
    plain_number_text,
    redundant_min_slice_count,
    slices_waited_for,
)
from elxpk_contract.spelling import typed

Settings = tuple[tuple[str, Any], ...]
Env = tuple[tuple[str, str], ...]

# Kubernetes expands `$(NAME)` in a container's command, args and env values when NAME is an env var of
# the container, and leaves it as is otherwise; `$$(NAME)` is the escape (kubernetes/pkg/kubelet/container/
# helpers.go ExpandContainerCommandAndArgs, third_party/forked/golang/expansion/expand.go).
_K8S_REFERENCE = re.compile(r"\$\$|\$\(([^)]*)\)")


class Slices(NamedTuple):
    num_slices: int
    elastic_slices: int
    max_slice_restarts: int


def slice_rules(n: int, e: int, restarts: int, *, pathways: bool, restarts_given: bool, elastic_given: bool
                ) -> tuple[Slices, list[str], list[str]]:
    """The slice counts and restart budget over their typed values: (the counts to use, errors, warnings).
    A refused --elastic-slices counts as 0, so the rules after it do not repeat it. Each line names the
    flags as the command spells them (`flag`)."""
    errors: list[str] = []
    warnings: list[str] = []
    elastic, slice_restarts = flag("elastic_slices"), flag("max_slice_restarts")
    if e and e >= n:
        errors.append(f"{elastic} {e}: must be below --num-slices ({n}); at least one slice must survive, "
                      f"so use 0..{n - 1} or raise --num-slices")
        e = 0
    if e and not pathways:
        errors += pathways_only(elastic, f"{elastic} {e}: needs Pathways; drop --no-pathways or set {elastic} 0 "
                                f"(multi-controller runs restart as a whole, see {flag('max_restarts')})",
                                typed("no_pathways"))
        e = 0
    if e and restarts == 0:
        errors.append(f"{slice_restarts} 0: an elastic run needs >= 1, otherwise a lost slice is never "
                      "restarted and the run fails; use 1 or more")
    elif not e and restarts_given and not elastic_given:
        warnings.append(f"{slice_restarts} only counts with {elastic} > 0; without it each "
                        "slice's Job gets 4 x VMs-per-slice pod restarts, as in xpk")
    return Slices(n, e, restarts), errors, warnings


# The most nodes one GKE cluster holds (GKE's quotas and limits page: 65,000 nodes, from GKE 1.31): every VM of
# every slice is one node, so a larger workload can never be scheduled; it would wait in Kueue for ever.
GKE_MAX_NODES = 65_000


def node_limit_problem(num_slices: int, vms_per_slice: int, machine: str) -> str | None:
    """--num-slices past what a GKE cluster can hold: one node per VM of every slice."""
    nodes = num_slices * vms_per_slice
    if nodes <= GKE_MAX_NODES:
        return None
    fewest = GKE_MAX_NODES // vms_per_slice
    return (f"--num-slices {num_slices}: {num_slices} x {machine} needs {nodes:,} nodes, past GKE's limit of "
            f"{GKE_MAX_NODES:,} nodes per cluster; use at most {fewest:,} slices of it")


def min_slice_count_rules(slices: Slices, min_count: int | None) -> tuple[list[str], list[str]]:
    """--elastic-min-slice-count against the slice counts: (errors, warnings). Below what Pathways keeps
    is redundant, not wrong (MaxText accepts it): a warning."""
    if min_count is None:
        return [], []
    n, e = slices.num_slices, slices.elastic_slices
    cross = cross_problems(n, min_count)
    if not cross and slices_waited_for(min_count, n) < n - e:
        return [], [redundant_min_slice_count(min_count, n, e)]
    return cross, []


def pre_start_problems(*, maxtext: bool, checkpoint_dir: str | None) -> list[str]:
    """--checkpoint-pre-start IMAGE: only for a MaxText run with a checkpoint directory to check."""
    if not maxtext:
        return ["--checkpoint-pre-start: only with --trainer maxtext (the bundled trainer checks and quarantines "
                "torn steps itself); drop it"]
    if not checkpoint_dir:
        return ["--checkpoint-pre-start: needs --checkpoint-dir, the MaxText run directory whose checkpoints/ it "
                "checks; e.g. --checkpoint-dir gs://my-bucket/run-1"]
    return []


def restart_codes(raw: str | None, *, headless: bool) -> tuple[tuple[int, ...], list[str]]:
    """--restart-on-exit-codes as in xpk: comma-separated exit codes or ranges (e.g. 1,75-77) that restart
    the group (counted) instead of failing the Job at once; (sorted unique codes, errors)."""
    option = "--restart-on-exit-codes"
    if raw is None:
        return (), []
    if headless:
        return (), [f"{option}: a {flag('headless')} workload has no user container whose exit code it could classify; "
                    "drop it"]
    codes: set[int] = set()
    for item in (part.strip() for part in raw.split(",")):
        low, sep, high = item.partition("-")
        try:
            if not plain_number_text(item):  # the one number-text rule: ASCII digits, no `_` groups
                raise ValueError(item)
            first, last = (int(low, 10), int(high, 10)) if sep else (int(item, 10), int(item, 10))
        except ValueError:
            return (), [f"{option} {raw!r}: {item!r} is not an exit code; give comma-separated codes or ranges "
                        "from 1 to 255, e.g. 1,75-77"]
        if not 1 <= first <= last <= 255:
            return (), [f"{option} {raw!r}: {item!r} is outside 1..255 (0 is success, exit codes end at 255); "
                        "e.g. 1,75-77"]
        codes.update(range(first, last + 1))
    return tuple(sorted(codes)), []


def reference_warnings(command: str | None, env: Env, settings: Settings, *, gpu: bool = False) -> list[str]:
    """A warning for each `$(NAME)` in --command/--env that names no env var of the container: Kubernetes
    expands the ones that do, and leaves these as they are (then bash runs `$(NAME)` as a command)."""
    defined = set(RESERVED_ENV) | {key for key, _ in env} | {env_name(name) for name, _ in settings}
    defined |= {env_name(f.name) for f in exposed(LAUNCHER_DERIVED)}
    if gpu:
        from elxpk.create.gpu import GPU_RESERVED_ENV  # lazy: keeps elxpk.create.gpu off a TPU dry-run

        defined |= GPU_RESERVED_ENV
    warnings = []
    sources = [("--command", command or "")] + [(f"--env {key}", value) for key, value in env]
    for source, text in sources:
        for name in dict.fromkeys(m.group(1) for m in _K8S_REFERENCE.finditer(text) if m.group(1) is not None):
            if name not in defined:
                warnings.append(f"{source}: $({name}) names no env var of the container, so Kubernetes leaves "
                                f"it as is (bash then runs it as a command); define {name} with --env, or "
                                f"write $$({name}) to silence this")
    return warnings

"""Timeouts and budgets that must fit together, checked before a submit (`workload create`) and on a rendered
manifest (`workload validate`). Each layer must outlast what it waits for:

1. the termination grace period against the checkpoint save time (on SIGTERM the trainer saves, then exits 77);
2. `elastic_timeout_seconds` against the slice replacement time (the trainer's wait for a lost slice);
3. the stall timeout against the step and save times (the watchdog measures step completions, saves included);
4. `elastic_max_retries` against the Kubernetes restart budgets (worker backoffLimit, JobSet maxRestarts).

`budget_findings(budgets, times)` returns (errors, warnings): an error is a combination that cannot work
(exit 2 before anything is written), a warning one that works badly; each names both inputs and the fix.
A fix that suggests a value reads the bound of that value's own row (the flag table's `high`, the trainer
table's `upper_bound`) and, where no value within it works, says so instead of suggesting one beyond it.
The times come from `--step-time`, `--checkpoint-save-time`, `--slice-replacement-time` or a measured run
(`--from-run`, read by elxpk.plan.calibrate); an unknown time skips its rules. Standard library only (and the
restart-budget formula of elxpk/create/failure_policy.py), apart from `read_times` importing the run reader
when --from-run is given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from elxpk.cluster.objects.labels import HEAD, is_pathways
from elxpk.create.failure_policy import slice_restarts
from elxpk.create.flags import BY_NAME
from elxpk.create.records import CreateFlags, ValidateFlags
from elxpk.errors import UsageError
from elxpk_contract.setting_rules import (
    ALL_SLICES,
    FIELDS,
    check_setting,
    default,
    env_name,
    flag_name,
    upper_bound,
)
from elxpk_contract.spelling import said

_TO = "raise {} to {}"  # a warning's fix: the value that leaves the margin
GRACE_SLACK_S = 10.0  # after the save: the wrapper, jax's shutdown and the container's exit (seconds, not a
# second grace period: 30 would make the default grace warn for any save, "raise to 31" for a 0.13 s one)
MARGIN = 1.5  # a wait or timeout this much longer than the typical time survives a slow one


class Times(NamedTuple):
    """Measured or estimated times in seconds (None: unknown), and how each was given, for the messages."""

    step_s: float | None = None
    save_s: float | None = None
    replacement_s: float | None = None
    restore_s: float | None = None  # for the planner hint only
    labels: Mapping[str, str] = MappingProxyType({})  # "step" | "save" | "replacement" -> its source

    def label(self, key: str) -> str:
        return self.labels.get(key, key)


class Budgets(NamedTuple):
    """The workload's side: what `workload create` was given, or what a rendered JobSet carries."""

    pathways: bool
    elastic: bool  # the trainer retries in process (elastic_enabled)
    has_trainer: bool  # a user container runs (not --headless)
    grace_s: int
    max_slice_restarts: int  # restarts of one slice's pods before its Job fails (worker backoffLimit / VMs)
    max_restarts: int  # JobSet failurePolicy.maxRestarts
    elastic_timeout_s: int = default("elastic_timeout_seconds")
    elastic_min_slice_count: int = default("elastic_min_slice_count")
    stall_timeout_s: float = default("stall_timeout_seconds")
    elastic_max_retries: int | None = None  # None: not given, the trainer's default is not checked
    vms_per_slice: int = 1  # the worker Job's backoffLimit is max_slice_restarts x this (a 32-bit integer)
    refused: frozenset[str] = frozenset()  # settings whose value the trainer would refuse: their rules skip


def _raise_to(flag: str, need: float, high: float | None, instead: str, *, phrase: str = "raise {} to at least {}") -> str:
    """The fix "raise FLAG to at least N" (or `phrase`), with N the whole number at or above `need`; or, when
    no value within the flag's bound `high` (None: any finite number) reaches `need`, a plain "no FLAG within
    its bound is long enough", followed by `instead` (what to change instead)."""
    value = math.ceil(need) if math.isfinite(need) else None
    if value is not None and (high is None or value <= high):
        return phrase.format(flag, value)
    within = f"no finite {flag}" if high is None else f"no {flag} within its bound (at most {_num(high)})"
    return f"{within} is long enough, so {instead}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _s(seconds: float) -> str:
    return f"{seconds:g} s"


def budget_findings(b: Budgets, t: Times) -> tuple[list[str], list[str]]:
    """(errors, warnings) of the four rules; see the module docstring."""
    errors: list[str] = []
    warnings: list[str] = []
    if not b.has_trainer:
        return errors, warnings
    _grace(b, t, errors, warnings)
    _elastic_wait(b, t, errors, warnings)
    _stall(b, t, errors, warnings)
    _retries(b, warnings)
    return errors, warnings


def _grace(b: Budgets, t: Times, errors: list[str], warnings: list[str]) -> None:
    if t.save_s is None:
        return
    need = MARGIN * t.save_s + GRACE_SLACK_S
    row = BY_NAME["termination_grace_period_seconds"]
    flag = f"{row.flag} {b.grace_s}"
    instead = "make the save shorter (fewer bytes per checkpoint, a faster store)"
    if b.grace_s < t.save_s:
        errors.append(f"{flag} is shorter than {t.label('save')}: a preemption's SIGTERM can never finish a save "
                      f"(the trainer saves, then exits 77), so each one loses the steps since the last "
                      f"checkpoint; {_raise_to(row.flag, need, row.high, instead)}")
    elif b.grace_s < need:
        warnings.append(f"{flag} leaves {_s(b.grace_s - t.save_s)} beyond {t.label('save')} for a slower save "
                        f"and the shutdown after it; {_raise_to(row.flag, need, row.high, instead, phrase=_TO)}")


def _elastic_wait(b: Budgets, t: Times, errors: list[str], warnings: list[str]) -> None:
    # Only a trainer that waits for every slice waits for a replacement; one that resizes goes on with the
    # survivors at once.
    if {"elastic_enabled", "elastic_min_slice_count", "elastic_timeout_seconds"} & b.refused:
        return
    if not b.elastic or b.elastic_min_slice_count != ALL_SLICES or t.replacement_s is None:
        return
    setting, need = "elastic_timeout_seconds", MARGIN * t.replacement_s
    fix, fix_to = (_raise_to(flag_name(setting), need, upper_bound(setting),
                             "resize onto the survivors instead (--elastic-min-slice-count)", **kw)
                   for kw in ({}, {"phrase": _TO}))
    flag = f"{flag_name(setting)} {b.elastic_timeout_s}"
    if b.elastic_timeout_s < t.replacement_s:
        if b.max_restarts == 0:
            errors.append(f"{flag} is shorter than {t.label('replacement')} and {said('max_restarts')} is 0: the trainer "
                          f"stops waiting (exit 124) before a lost slice is back, and nothing restarts the "
                          f"JobSet, so the first slice loss ends the run; {fix}")
        else:
            warnings.append(f"{flag} is shorter than {t.label('replacement')}: every slice loss ends in exit 124 "
                            f"and a whole-JobSet restart ({said('max_restarts')} {b.max_restarts}) instead of an "
                            f"in-process recovery; {fix}")
    elif b.elastic_timeout_s < need:
        warnings.append(f"{flag} leaves {_s(b.elastic_timeout_s - t.replacement_s)} beyond "
                        f"{t.label('replacement')}: a slower replacement ends the wait (exit 124, a JobSet "
                        f"restart); {fix_to}")


def _stall(b: Budgets, t: Times, errors: list[str], warnings: list[str]) -> None:
    if (t.step_s is None and t.save_s is None) or "stall_timeout_seconds" in b.refused:
        return
    step, save = t.step_s or 0.0, t.save_s or 0.0
    # A checkpoint step's interval holds the step and the blocking part of the save (elxpk_contract/stall.py).
    longest = step + save
    setting = "stall_timeout_seconds"
    fix, give = (_raise_to(flag_name(setting), 2 * longest, upper_bound(setting), "make the steps and saves shorter",
                           **kw) for kw in ({}, {"phrase": "give {} {}"}))
    what = " plus ".join(t.label(k) for k, v in (("step", t.step_s), ("save", t.save_s)) if v is not None)
    if b.stall_timeout_s > 0:
        flag = f"--stall-timeout-seconds {b.stall_timeout_s:g}"
        if t.step_s is not None and b.stall_timeout_s <= t.step_s:
            errors.append(f"{flag} is not longer than {t.label('step')}: every step would count as a stall "
                          f"(exit 76); {fix}, or give 0 (auto)")
        elif b.stall_timeout_s < longest:
            warnings.append(f"{flag} is shorter than {what} ({_s(longest)}): the watchdog would fire on "
                            f"checkpoint steps; {fix}")
        return
    from elxpk_contract.stall import (  # lazy: keeps _decimal, _statistics ... off `workload create --dry-run`
        STALL_FLOOR_S,
        STALL_MIN_STEPS,
        STALL_STEP_MULTIPLE,
        effective_stall_timeout,
    )

    auto = effective_stall_timeout(0, [step] * STALL_MIN_STEPS) if t.step_s else STALL_FLOOR_S
    if auto < longest:
        warnings.append(f"--stall-timeout-seconds 0 (auto: max({STALL_FLOOR_S:g} s, {STALL_STEP_MULTIPLE:g} x "
                        f"the median step) = {_s(auto)}) is shorter than {what} ({_s(longest)}): the watchdog "
                        f"would fire on checkpoint steps; {give}")


def _retries(b: Budgets, warnings: list[str]) -> None:
    r = b.elastic_max_retries
    if r is None or {"elastic_enabled", "elastic_max_retries"} & b.refused:
        return
    if not b.elastic:
        if r > 1:
            warnings.append(f"--elastic-max-retries {r}: the trainer retries in process only with {said('elastic_slices')} "
                            f"> 0; here every failure restarts the whole JobSet, up to {said('max_restarts')} "
                            f"{b.max_restarts}: set {said('max_restarts')} for the budget you want and drop "
                            f"--elastic-max-retries")
        return
    m = b.max_slice_restarts
    if r - 1 > m:
        end = f"ends the run ({said('max_restarts')} 0)" if b.max_restarts == 0 else (
            f"restarts the whole JobSet ({said('max_restarts')} {b.max_restarts})")
        row = BY_NAME["max_slice_restarts"]
        most = slice_restarts(int(row.high or 0), b.vms_per_slice)  # the most whose worker backoffLimit fits the bound
        raise_it = (f"raise {row.flag} to {r - 1} or " if r - 1 <= most else
                    f"{row.flag} goes up to {most} with {b.vms_per_slice} VM(s) per slice, so ")
        warnings.append(f"--elastic-max-retries {r} allows {r - 1} in-process recoveries, but {row.flag} "
                        f"{m} lets one slice's pods restart only {m} times: a slice lost {m + 1} times fails its "
                        f"Job and {end} before the trainer's retries are spent; {raise_it}lower "
                        f"--elastic-max-retries to {m + 1}")


# The rows of the three times, and the key of each in Times.
_TIME_ROWS = (("step", "step_time"), ("save", "checkpoint_save_time"), ("replacement", "slice_replacement_time"))


def read_times(flags: CreateFlags | ValidateFlags, given: Mapping[str, Any]) -> tuple[Times, list[str]]:
    """The times of the duration flags (`--step-time`, `--checkpoint-save-time`, `--slice-replacement-time`),
    as their rows read them (`flags`: seconds or None; `given`: name -> as typed, for the messages), each
    falling back to what `--from-run RUN_DIR` measured; (times, one error line per problem of the run)."""
    errors: list[str] = []
    values: dict[str, float | None] = {
        "step": flags.step_time, "save": flags.checkpoint_save_time, "replacement": flags.slice_replacement_time}
    labels: dict[str, str] = {}
    for key, name in _TIME_ROWS:
        if values[key] is not None:
            labels[key] = f"{BY_NAME[name].flag} {given.get(name)}"
    restore = None
    from_run = flags.from_run  # a text row reads as typed
    if from_run is not None:
        measured, problems = _measured(str(from_run))
        errors += problems
        for key, value in measured.items():
            if key == "restore":
                restore = value
            elif values.get(key) is None and value is not None:
                values[key], labels[key] = value, f"the {key} time measured in --from-run {from_run} ({_s(value)})"
    return Times(step_s=values["step"], save_s=values["save"], replacement_s=values["replacement"],
                 restore_s=restore, labels=labels), errors


def _measured(run_dir: str) -> tuple[dict[str, Any], list[str]]:
    from elxpk.plan.calibrate import (
        calibrate,  # lazy: keeps elxpk.plan, elxpk.plan.calibrate ... off `workload create --dry-run`
    )

    try:
        cal = calibrate(run_dir)
    except UsageError as exc:
        return {}, list(exc.messages)
    return {"step": cal.step_time_s, "save": cal.save_s, "replacement": cal.replacement_s,
            "restore": cal.restore_s}, []


# A rendered JobSet --------------------------------------------------------------------------------------

def jobset_budget_findings(jobset: dict, times: Times | None = None) -> tuple[list[str], list[str]]:
    """The cross-field timeout and budget rules on a JobSet, with its values read from its fields and env.
    An ELXPK_* value the trainer would refuse is an error of its own (`PATH: message`), and the rules that
    read it are skipped: advice computed from a value the trainer never runs with would mislead."""
    try:
        budgets, refused = read_jobset(jobset)
    except (TypeError, ValueError, AttributeError):  # a malformed manifest: its violations say why
        return [], []
    errors, warnings = budget_findings(budgets, times or Times())
    return refused + errors, warnings


def budgets_from_jobset(jobset: dict[str, Any]) -> Budgets:
    return read_jobset(jobset)[0]


def read_jobset(jobset: dict[str, Any]) -> tuple[Budgets, list[str]]:
    """The Budgets a JobSet carries, and one line per ELXPK_* value of the trainer's container that the
    trainer itself would refuse (its own rule, elxpk_contract.setting_rules.check_setting). The pod whose
    container has ELXPK_* env is the trainer's (else the Pathways head's user container, else the first
    replicatedJob); settings not in its env take the contract's defaults, except elastic_max_retries
    (unchecked unless given). A field that is not a whole number raises ValueError (the schema reports it)."""
    spec = jobset.get("spec") or {}
    rjobs = {str(r.get("name")): (r.get("template") or {}).get("spec") or {} for r in spec.get("replicatedJobs") or []}
    pathways = is_pathways(jobset)
    trainer_job, box, where = _trainer_container(spec.get("replicatedJobs") or [])
    pod = ((rjobs.get(trainer_job or "") or {}).get("template") or {}).get("spec") or {}
    values, refused = trainer_env_values(box or {}, where)

    def setting(name: str) -> Any:
        return values.get(name, default(name))

    worker = rjobs.get("worker") or {}
    vms = max(_whole(worker.get("completions"), 1), 1)
    elastic = values["elastic_enabled"] if "elastic_enabled" in values else any(
        str(arg).startswith("--num_elastic_slices=") for arg in _proxy_args(rjobs))
    budgets = Budgets(
        pathways=pathways, elastic=elastic, has_trainer=box is not None,
        grace_s=_whole(pod.get("terminationGracePeriodSeconds"), 30),
        max_slice_restarts=slice_restarts(_whole(worker.get("backoffLimit"), 0), vms) if pathways else 0,
        max_restarts=_whole((spec.get("failurePolicy") or {}).get("maxRestarts"), 0),
        elastic_timeout_s=setting("elastic_timeout_seconds"),
        elastic_min_slice_count=setting("elastic_min_slice_count"),
        stall_timeout_s=setting("stall_timeout_seconds"),
        elastic_max_retries=values.get("elastic_max_retries"), vms_per_slice=vms,
        refused=frozenset(name for name, _ in refused),
    )
    return budgets, [line for _, line in refused]


def _whole(value: object, absent: int) -> int:
    """An integer field of the manifest: `absent` when missing; anything but a whole number (a string, a
    float such as `.inf`, a bool) is a ValueError, the schema's to report."""
    if value is None:
        return absent
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(value)
    return value


def trainer_env_values(box: dict[str, Any], where: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The trainer settings a container's env gives, read as the trainer reads them (a later entry of one
    name wins, as in Kubernetes; an entry without a value is the empty string; `valueFrom` is unknown here,
    so skipped); and (setting, line) for each value the trainer would refuse."""
    found: dict[str, tuple[int, Any]] = {}
    for k, entry in enumerate(box.get("env") or []):
        if isinstance(entry, dict) and "valueFrom" not in entry:
            found[str(entry.get("name"))] = (k, entry.get("value", ""))
    values: dict[str, Any] = {}
    refused: list[tuple[int, str, str]] = []
    for name, row in FIELDS.items():
        if row.internal or env_name(name) not in found:
            continue
        k, raw = found[env_name(name)]
        if row.repeatable:
            raw = [part for part in str(raw).split(",") if part.strip()]
        value, problem = check_setting(name, raw, env_name(name))
        if problem is None:
            values[name] = value
        else:
            refused.append((k, name, f"{where}.env[{k}].value: {problem}; the trainer in container "
                                     f"{str(box.get('name'))!r:.80} refuses it (exit 2), so no budget is checked "
                                     f"against it"))
    return values, [(name, line) for _, name, line in sorted(refused)]


_PATHWAYS_CONTAINERS = {"pathways-proxy", "pathways-rm", "pathways-worker"}


def containers(rjob: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """(index, container) of a replicatedJob's pod; none where a level is missing or of the wrong type."""
    pod: Any = rjob
    for key in ("template", "spec", "template", "spec"):
        pod = pod.get(key) if isinstance(pod, dict) else None
    boxes = pod.get("containers") if isinstance(pod, dict) else None
    return [(j, c) for j, c in enumerate(boxes) if isinstance(c, dict)] if isinstance(boxes, list) else []


def _trainer_container(replicated: list[Any]) -> tuple[str | None, dict[str, Any] | None, str]:
    """(replicatedJob name, container, its path in the manifest) of the container that runs the trainer."""
    indexed = [(i, r) for i, r in enumerate(replicated) if isinstance(r, dict)]

    def path(i: int, j: int) -> str:
        return f"spec.replicatedJobs[{i}].template.spec.template.spec.containers[{j}]"

    for i, rjob in indexed:
        for j, box in containers(rjob):
            if any(str(e.get("name", "")).startswith("ELXPK_") for e in box.get("env") or [] if isinstance(e, dict)):
                return str(rjob.get("name")), box, path(i, j)
    order = sorted(indexed, key=lambda pair: pair[1].get("name") != HEAD)  # the head's user container first
    for i, rjob in order:
        users = [(j, c) for j, c in containers(rjob) if c.get("name") not in _PATHWAYS_CONTAINERS]
        if users:
            return str(rjob.get("name")), users[0][1], path(i, users[0][0])
    return None, None, ""


def _proxy_args(rjobs: dict[str, dict[str, Any]]) -> list[Any]:
    pod = ((rjobs.get(HEAD) or {}).get("template") or {}).get("spec") or {}
    boxes = (pod.get("initContainers") or []) + (pod.get("containers") or [])
    return [a for c in boxes if isinstance(c, dict) and c.get("name") == "pathways-proxy" for a in c.get("args") or []]

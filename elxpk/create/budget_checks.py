"""Timeouts and budgets that must fit together, checked before a submit (`workload create`) and on a rendered
manifest (`workload validate`). Each layer must outlast what it waits for:

1. the termination grace period against the checkpoint save time (on SIGTERM the trainer saves, then exits 77);
2. `elastic_timeout_seconds` against the slice replacement time (the trainer's wait for a lost slice);
3. the stall timeout against the step and save times (the watchdog measures step completions, saves included);
4. `elastic_max_retries` against the Kubernetes restart budgets (worker backoffLimit, JobSet maxRestarts).

`budget_findings(budgets, times)` returns (errors, warnings): an error is a combination that cannot work
(exit 2 before anything is written), a warning one that works badly; each names both inputs and the fix.
The times come from `--step-time`, `--checkpoint-save-time`, `--slice-replacement-time` or a measured run
(`--from-run`, read by elxpk.plan.calibrate); an unknown time skips its rules. Standard library only, apart
from `read_times` importing the run reader when --from-run is given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from elxpk.errors import UsageError
from elxpk.units import parse_duration
from elxpk_contract.setting_rules import ALL_SLICES, default, env_name
from elxpk_contract.step_names import ascii_number

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
    need = math.ceil(MARGIN * t.save_s + GRACE_SLACK_S)
    flag = f"--termination-grace-period-seconds {b.grace_s}"
    if b.grace_s < t.save_s:
        errors.append(f"{flag} is shorter than {t.label('save')}: a preemption's SIGTERM can never finish a save "
                      f"(the trainer saves, then exits 77), so each one loses the steps since the last "
                      f"checkpoint; raise --termination-grace-period-seconds to at least {need}")
    elif b.grace_s < need:
        warnings.append(f"{flag} leaves {_s(b.grace_s - t.save_s)} beyond {t.label('save')} for a slower save "
                        f"and the shutdown after it; raise --termination-grace-period-seconds to {need}")


def _elastic_wait(b: Budgets, t: Times, errors: list[str], warnings: list[str]) -> None:
    # Only a trainer that waits for every slice waits for a replacement; one that resizes goes on with the
    # survivors at once.
    if not b.elastic or b.elastic_min_slice_count != ALL_SLICES or t.replacement_s is None:
        return
    need = math.ceil(MARGIN * t.replacement_s)
    flag = f"--elastic-timeout-seconds {b.elastic_timeout_s}"
    if b.elastic_timeout_s < t.replacement_s:
        if b.max_restarts == 0:
            errors.append(f"{flag} is shorter than {t.label('replacement')} and --max-restarts is 0: the trainer "
                          f"stops waiting (exit 124) before a lost slice is back, and nothing restarts the "
                          f"JobSet, so the first slice loss ends the run; raise --elastic-timeout-seconds to at "
                          f"least {need}")
        else:
            warnings.append(f"{flag} is shorter than {t.label('replacement')}: every slice loss ends in exit 124 "
                            f"and a whole-JobSet restart (--max-restarts {b.max_restarts}) instead of an "
                            f"in-process recovery; raise --elastic-timeout-seconds to at least {need}")
    elif b.elastic_timeout_s < need:
        warnings.append(f"{flag} leaves {_s(b.elastic_timeout_s - t.replacement_s)} beyond "
                        f"{t.label('replacement')}: a slower replacement ends the wait (exit 124, a JobSet "
                        f"restart); raise --elastic-timeout-seconds to {need}")


def _stall(b: Budgets, t: Times, errors: list[str], warnings: list[str]) -> None:
    if t.step_s is None and t.save_s is None:
        return
    step, save = t.step_s or 0.0, t.save_s or 0.0
    # A checkpoint step's interval holds the step and the blocking part of the save (elxpk_contract/stall.py).
    longest = step + save
    need = math.ceil(2 * longest)
    what = " plus ".join(t.label(k) for k, v in (("step", t.step_s), ("save", t.save_s)) if v is not None)
    if b.stall_timeout_s > 0:
        flag = f"--stall-timeout-seconds {b.stall_timeout_s:g}"
        if t.step_s is not None and b.stall_timeout_s <= t.step_s:
            errors.append(f"{flag} is not longer than {t.label('step')}: every step would count as a stall "
                          f"(exit 76); raise --stall-timeout-seconds to at least {need}, or give 0 (auto)")
        elif b.stall_timeout_s < longest:
            warnings.append(f"{flag} is shorter than {what} ({_s(longest)}): the watchdog would fire on "
                            f"checkpoint steps; raise --stall-timeout-seconds to at least {need}")
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
                        f"would fire on checkpoint steps; give --stall-timeout-seconds {need}")


def _retries(b: Budgets, warnings: list[str]) -> None:
    r = b.elastic_max_retries
    if r is None:
        return
    if not b.elastic:
        if r > 1:
            warnings.append(f"--elastic-max-retries {r}: the trainer retries in process only with --elastic-slices "
                            f"> 0; here every failure restarts the whole JobSet, up to --max-restarts "
                            f"{b.max_restarts}: set --max-restarts for the budget you want and drop "
                            f"--elastic-max-retries")
        return
    m = b.max_slice_restarts
    if r - 1 > m:
        end = "ends the run (--max-restarts 0)" if b.max_restarts == 0 else (
            f"restarts the whole JobSet (--max-restarts {b.max_restarts})")
        warnings.append(f"--elastic-max-retries {r} allows {r - 1} in-process recoveries, but --max-slice-restarts "
                        f"{m} lets one slice's pods restart only {m} times: a slice lost {m + 1} times fails its "
                        f"Job and {end} before the trainer's retries are spent; raise --max-slice-restarts to "
                        f"{r - 1} or lower --elastic-max-retries to {m + 1}")


def read_times(*, step: object = None, save: object = None, replacement: object = None,
               from_run: object = None) -> tuple[Times, list[str]]:
    """The times from the duration flags (`--step-time`, `--checkpoint-save-time`, `--slice-replacement-time`),
    each falling back to what `--from-run RUN_DIR` measured; (times, one error line per bad flag)."""

    errors: list[str] = []
    values: dict[str, float | None] = {}
    labels: dict[str, str] = {}
    for key, flag, raw in (("step", "--step-time", step), ("save", "--checkpoint-save-time", save),
                           ("replacement", "--slice-replacement-time", replacement)):
        values[key] = None
        if raw is None:
            continue
        try:
            seconds = parse_duration(raw)  # type: ignore[arg-type]
        except ValueError as exc:
            errors.append(f"{flag}: {exc}; e.g. 90s, 30m, 4h or 7d")
            continue
        if seconds <= 0:
            errors.append(f"{flag} {raw!r}: must be positive; e.g. 90s, 30m, 4h or 7d")
            continue
        values[key], labels[key] = seconds, f"{flag} {raw}"
    restore = None
    if from_run is not None:
        measured, problems = _measured(str(from_run))
        errors += problems
        for key, seconds in measured.items():
            if key == "restore":
                restore = seconds
            elif values.get(key) is None and seconds is not None:
                values[key], labels[key] = seconds, f"the {key} time measured in --from-run {from_run} ({_s(seconds)})"
    return Times(step_s=values["step"], save_s=values["save"], replacement_s=values["replacement"],
                 restore_s=restore, labels=labels), errors


def _measured(run_dir: str) -> tuple[dict[str, Any], list[str]]:
    from elxpk.plan.calibrate import (
        calibrate,  # lazy: keeps elxpk.plan, elxpk.plan.calibrate ... off `workload create --dry-run`
    )

    try:
        cal = calibrate(Path(run_dir))
    except UsageError as exc:
        return {}, list(exc.messages)
    return {"step": cal.step_time_s, "save": cal.save_s, "replacement": cal.replacement_s,
            "restore": cal.restore_s}, []


# A rendered JobSet --------------------------------------------------------------------------------------

def jobset_budget_findings(jobset: dict, times: Times | None = None) -> tuple[list[str], list[str]]:
    """The cross-field timeout and budget rules on a JobSet, with its values read from its fields and env."""
    try:
        budgets = budgets_from_jobset(jobset)
    except (TypeError, ValueError, AttributeError):  # a malformed manifest: its violations say why
        return [], []
    return budget_findings(budgets, times or Times())


def budgets_from_jobset(jobset: dict[str, Any]) -> Budgets:
    """The Budgets a JobSet carries: the pod whose container has ELXPK_* env is the trainer's (else the
    Pathways head's user container, else the first replicatedJob); settings not in its env take the
    contract's defaults, except elastic_max_retries (unchecked unless given)."""
    spec = jobset.get("spec") or {}
    rjobs = {str(r.get("name")): (r.get("template") or {}).get("spec") or {} for r in spec.get("replicatedJobs") or []}
    pathways = "pathways-head" in rjobs
    trainer_job, box = _trainer_container(rjobs)
    pod = ((rjobs.get(trainer_job or "") or {}).get("template") or {}).get("spec") or {}
    env = {str(e.get("name")): e.get("value") for e in (box or {}).get("env") or [] if isinstance(e, dict)}

    def setting(name: str) -> Any:
        raw = env.get(env_name(name))
        try:
            return type(default(name))(raw) if raw is not None else default(name)
        except (TypeError, ValueError):
            return default(name)

    worker = rjobs.get("worker") or {}
    vms = max(int(worker.get("completions") or 1), 1)
    elastic_env = env.get(env_name("elastic_enabled"))
    elastic = elastic_env == "true" if elastic_env is not None else any(
        str(arg).startswith("--num_elastic_slices=") for arg in _proxy_args(rjobs))
    retries = env.get(env_name("elastic_max_retries"))
    return Budgets(
        pathways=pathways, elastic=elastic, has_trainer=box is not None,
        grace_s=int(pod.get("terminationGracePeriodSeconds", 30)),
        max_slice_restarts=int(worker.get("backoffLimit", 0)) // vms if pathways else 0,
        max_restarts=int((spec.get("failurePolicy") or {}).get("maxRestarts", 0)),
        elastic_timeout_s=setting("elastic_timeout_seconds"),
        elastic_min_slice_count=setting("elastic_min_slice_count"),
        stall_timeout_s=setting("stall_timeout_seconds"),
        elastic_max_retries=ascii_number(str(retries)) if retries is not None else None,
    )


_PATHWAYS_CONTAINERS = {"pathways-proxy", "pathways-rm", "pathways-worker"}


def _containers(rjob: dict[str, Any]) -> list[dict[str, Any]]:
    pod = (rjob.get("template") or {}).get("spec") or {}
    return [c for c in pod.get("containers") or [] if isinstance(c, dict)]


def _trainer_container(rjobs: dict[str, dict[str, Any]]) -> tuple[str | None, dict[str, Any] | None]:
    for name, rjob in rjobs.items():
        for box in _containers(rjob):
            if any(str(e.get("name", "")).startswith("ELXPK_") for e in box.get("env") or [] if isinstance(e, dict)):
                return name, box
    for name in ("pathways-head", *rjobs):
        users = [c for c in _containers(rjobs.get(name) or {}) if c.get("name") not in _PATHWAYS_CONTAINERS]
        if users:
            return name, users[0]
    return None, None


def _proxy_args(rjobs: dict[str, dict[str, Any]]) -> list[Any]:
    pod = ((rjobs.get("pathways-head") or {}).get("template") or {}).get("spec") or {}
    boxes = (pod.get("initContainers") or []) + (pod.get("containers") or [])
    return [a for c in boxes if isinstance(c, dict) and c.get("name") == "pathways-proxy" for a in c.get("args") or []]

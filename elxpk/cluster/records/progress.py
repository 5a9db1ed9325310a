"""The trainer's progress as `workload status` shows it: CHECKPOINT_DIR/elxpk-progress.json.

The trainer publishes it (trainer/elastic/progress.py, record elxpk_contract.progress_record.Progress); the checkpoint
directory is found in the workload itself: the ELXPK_CHECKPOINT_DIR env or a --checkpoint-dir argument of
the trainer container (the Pathways head's, else the first worker's). A local path (tests, a shared
filesystem) is read directly, gs:// through the JSON API (elxpk/cluster/api/gcs.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from elxpk.bounded_read import decode_text, read_limited
from elxpk.cluster.api.gcs import Gcs
from elxpk.cluster.objects.labels import HEAD
from elxpk.cluster.objects.workloads import JobSet
from elxpk.cluster.records.status import worker_replicated_job
from elxpk.errors import ElxpkError
from elxpk_contract.progress_record import PROGRESS_BYTES, PROGRESS_FILE, read_progress
from elxpk_contract.record_fields import RecordError
from elxpk_contract.settings import check_setting, default, env_name, flag_name

if TYPE_CHECKING:
    from elxpk_contract.progress_record import Progress

SETTING = "checkpoint_dir"
PERIOD = "checkpoint_period"


def checkpoint_dir(jobset: dict) -> str | None:
    return setting_value(jobset, SETTING)


def checkpoint_period(jobset: dict) -> int:
    """The save period the workload gives its trainer (env or flag, as for the directory), read by the
    trainer's own rule (ASCII digits, within the row's bounds: `²` is no period); else the default."""

    value = setting_value(jobset, PERIOD)
    period, problem = check_setting(PERIOD, value) if value is not None else (None, "absent")
    return period if problem is None and isinstance(period, int) else int(default(PERIOD))


def saves_stopped(progress: Progress, period: int) -> bool:
    """A running trainer two periods or more past its last committed save (or past step 0 without one): the
    cadence `elxpk checkpoint inspect` checks, from the record alone."""
    return progress.state == "running" and progress.steps_done - (progress.checkpoint_step or 0) >= 2 * period


def setting_value(jobset: dict, setting: str) -> str | None:
    """A trainer setting as the workload gives it: its ELXPK_* env or its --flag in the trainer container's
    command (the Pathways head's, else the first worker's)."""

    env, flag = env_name(setting), flag_name(setting)
    view = JobSet.of(jobset)
    worker = worker_replicated_job(view)
    ordered = [r for r in view.replicated_jobs if r.name == HEAD] + ([worker] if worker else [])
    for rjob in ordered:
        for container in rjob.job.containers:
            for var in container.get("env") or []:
                if var.get("name") == env and var.get("value"):
                    return var["value"]
            args = [*(container.get("command") or []), *(container.get("args") or [])]
            for i, arg in enumerate(args):
                if arg.startswith(flag + "="):
                    return arg.split("=", 1)[1]
                if arg == flag and i + 1 < len(args):
                    return args[i + 1]
    return None


def read_progress_text(directory: str) -> str | None:
    if directory.startswith("gs://"):
        content, _ = Gcs(what=f"the checkpoint directory {directory}").read(directory.rstrip("/") + "/" + PROGRESS_FILE, limit=PROGRESS_BYTES)
        if content is not None and len(content) > PROGRESS_BYTES:
            raise ValueError(f"over {PROGRESS_BYTES // 1024} KiB, not a progress record")
        return None if content is None else decode_text(content, "JSON")

    path = Path(directory) / PROGRESS_FILE
    try:
        return decode_text(read_limited(path, limit=PROGRESS_BYTES), "JSON")
    except FileNotFoundError:
        return None


def progress_of(jobset: dict, now: float, clock: Callable[[], float] | None = None) -> tuple[dict | None, str]:
    """(progress record with ages, '') or (None, why not); (None, '') when the workload names no directory.
    `clock`: the ages are as of the end of the read (a gs:// read may ride out a pause), else of `now`."""

    directory = checkpoint_dir(jobset)
    if directory is None:
        return None, ""
    try:
        text = read_progress_text(directory)
    except (ElxpkError, OSError, ValueError) as exc:  # ValueError: bounded_read.ReadRefused
        return None, f"cannot read {directory}/{PROGRESS_FILE}: {exc}"
    if text is None:
        return None, f"no {PROGRESS_FILE} in {directory} yet (the trainer writes it after its first step)"
    try:
        progress = read_progress(text)
    except RecordError as exc:
        return None, str(exc)
    now = clock() if clock is not None else now
    data = progress.to_json()
    data["directory"] = directory
    data["step_age_s"] = progress.step_age(now)
    data["checkpoint_age_s"] = progress.checkpoint_age(now)
    data["gave_up"] = progress.gave_up()  # for good (its exit code fails the Job), not a stop the restart retries
    data["checkpoint_period"] = period = checkpoint_period(jobset)
    data["saves_stopped"] = saves_stopped(progress, period)
    return data, ""

"""`workload create`'s typed records: its flags as read (`CreateFlags`), `workload validate`'s
(`ValidateFlags`), and what its stages hand on (`Parsed`, `Checked`, `Plan`: elxpk/create/pipeline.py).

Each flag record has one attribute per row of elxpk/create/flags.py the command reads, in the table's order
(elxpk/flag_records.py; tests/test_flag_records.py holds them to the rows); a duration is in seconds. The
stage records are plain classes with slots: a NamedTuple or a dataclass costs its definition on every
start, and `workload create --dry-run` has a start-up budget. Standard library and elxpk's own records only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from elxpk.flag_records import Record

if TYPE_CHECKING:  # annotations only: the stages import these themselves
    from elxpk.create.dialect import Dialect
    from elxpk.create.manifest import Manifest
    from elxpk.create.spec import Created, CreateOptions, WorkloadSpec


class CreateFlags(Record):
    """The rows `workload create` reads itself (elxpk/create/flag_values.py `_ROWS`: gcluster's own rows
    and the aliases are elxpk's keys by then)."""

    workload: str | None
    tpu_type: str | None
    num_slices: int
    device_type: str | None
    num_nodes: int
    command: str | None
    docker_image: str
    docker_name: str
    trainer: str | None  # None (the user's own --command), "elxpk" or "maxtext"
    no_pathways: bool
    headless: bool
    elastic_slices: int
    max_slice_restarts: int
    max_restarts: int
    restart_on_exit_codes: str | None
    priority: str
    service_account: str | None
    queue: str
    spot: bool
    flex_start: bool
    max_run_duration: float | None
    reservation: str | None
    on_demand: bool
    termination_grace_period_seconds: int
    ttl_seconds_after_finished: int
    env: Sequence[str] | None
    env_file: str | None
    proxy_server_image: str
    server_image: str
    worker_image: str | None
    pathways_proxy_env: Sequence[str] | None
    pathways_server_env: Sequence[str] | None
    pathways_worker_env: Sequence[str] | None
    pathways_gcs_location: str
    custom_proxy_server_args: str | None
    custom_server_args: str | None
    custom_worker_args: str | None
    slice_mtbf: float | None
    step_time: float | None
    checkpoint_save_time: float | None
    slice_replacement_time: float | None
    from_run: str | None
    dry_run: bool
    dry_run_server: bool
    replace: bool
    check_data: bool
    check_fit: bool
    checkpoint_pre_start: str | None
    output_manifest_file: str | None


class ValidateFlags(Record):
    """`workload validate`'s rows (flags.of_command("validate")), then -o's."""

    step_time: float | None
    checkpoint_save_time: float | None
    slice_replacement_time: float | None
    from_run: str | None
    check_data: bool
    output: str


class Parsed:
    """Stage 1: the flags in elxpk's rows' keys (as typed), the dialect, the target, and the dialect's and the
    target's problems (reported with the check's)."""

    __slots__ = ("given", "dialect", "target", "dialect_problems", "target_problems")

    def __init__(self, given: dict[str, Any], dialect: Dialect, target: Any, dialect_problems: list[str],
                 target_problems: list[str]) -> None:
        self.given, self.dialect, self.target = given, dialect, target
        self.dialect_problems, self.target_problems = dialect_problems, target_problems


class Checked:
    """Stages 1 and 2: the spec, options and warnings (`Created`), the flags as read (the command's own checks
    read theirs), the dialect and the target (elxpk.cluster.access.target.ClusterTarget)."""

    __slots__ = ("created", "flags", "dialect", "target")

    def __init__(self, created: Created, flags: CreateFlags, dialect: Dialect, target: Any) -> None:
        self.created, self.flags, self.dialect, self.target = created, flags, dialect, target


class Plan:
    """Everything `workload create` does, decided: the spec, how the command runs, the dialect, the target,
    the admitted manifest, and its text in --output's format (what is printed, written and, as objects,
    sent)."""

    __slots__ = ("spec", "run", "dialect", "target", "manifest", "text")

    def __init__(self, spec: WorkloadSpec, run: CreateOptions, dialect: Dialect, target: Any, manifest: Manifest,
                 text: str) -> None:
        self.spec, self.run, self.dialect, self.target, self.manifest, self.text = (
            spec, run, dialect, target, manifest, text)

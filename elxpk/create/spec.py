"""The one typed, frozen source of truth for `elxpk workload create`.

`elxpk.create.checks.parse_create(...)` takes the raw flag values (strings as typed, so that every bad integer
is reported together with every other error, not one at a time by the parser), validates all of
them before any I/O, and raises one `UsageError` carrying one line per problem, each naming the
flag and the fix; else it returns a `Created`: the spec, how the command runs, and the warnings (which
are not what was asked for, so the spec does not carry them: two specs asked for alike are equal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from elxpk.catalog import TpuType
from elxpk.cluster.access.target import DEFAULT_NAMESPACE
from elxpk.create.failure_policy import worker_backoff_limit
from elxpk.create.flags import PRIORITIES, RESERVED_ENV, default
from elxpk_contract.setting_rules import default as setting_default

__all__ = ["PRIORITIES", "RESERVED_ENV", "CreateOptions", "Created", "WorkloadSpec"]

if TYPE_CHECKING:
    from elxpk.catalog import GpuType
    from elxpk.create.budget_checks import Times
    from elxpk.create.capacity import Capacity

TRAINER_COMMAND = "python -m trainer"

class WorkloadSpec(NamedTuple):
    """Everything `workload create` was asked for, validated. Times are in seconds. The defaults are the
    flag table's (elxpk/create/flags.py). A NamedTuple, not a frozen dataclass: as immutable, and no
    generated methods to exec on every start (`workload create --dry-run` has a start-up budget)."""

    workload: str
    tpu: TpuType | None  # None for a GPU workload (--device-type): then `gpu` and `num_nodes`
    num_slices: int = default("num_slices")
    command: str | None = None  # the user's shell command; with --trainer, the trainer command line
    docker_image: str = default("docker_image")
    docker_name: str = default("docker_name")
    pathways: bool = True
    headless: bool = False
    trainer: bool = False  # the bundled trainer (--trainer, --trainer elxpk)
    maxtext: bool = False  # --trainer maxtext: `command` is the MaxText command with elxpk's overrides added
    # --checkpoint-pre-start IMAGE (--trainer maxtext): an init container from IMAGE moves torn checkpoint
    # steps aside before MaxText restores (python -m elxpk.checkpoints; docs/maxtext.md). None: off.
    checkpoint_pre_start: str | None = None
    elastic_slices: int = default("elastic_slices")
    max_slice_restarts: int = default("max_slice_restarts")
    max_restarts: int = default("max_restarts")
    priority: str = default("priority")
    queue: str = default("queue")
    service_account: str | None = None  # None: xpk's (xpk-sa on GPU, default on TPU); "default": no field
    namespace: str = DEFAULT_NAMESPACE
    termination_grace_period_seconds: int = default("termination_grace_period_seconds")
    ttl_seconds_after_finished: int = default("ttl_seconds_after_finished")
    proxy_server_image: str = default("proxy_server_image")
    server_image: str = default("server_image")
    worker_image: str = default("server_image")  # --worker-image defaults to --server-image
    pathways_gcs_location: str = default("pathways_gcs_location")
    custom_proxy_server_args: tuple[str, ...] = ()
    custom_server_args: tuple[str, ...] = ()
    custom_worker_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # --pathways-{proxy,server,worker}-env (gcluster's flags): env of those containers, in the order given.
    pathways_proxy_env: tuple[tuple[str, str], ...] = ()
    pathways_server_env: tuple[tuple[str, str], ...] = ()
    pathways_worker_env: tuple[tuple[str, str], ...] = ()
    # --restart-on-exit-codes: codes restarted (counted) instead of failing the Job at once (xpk's flag).
    restart_on_exit_codes: tuple[int, ...] = ()
    # The trainer settings given as `workload create` flags: (name, value) in the contract table's order.
    # Names, defaults, bounds and help live in elxpk_contract.settings; nothing here repeats them.
    settings: tuple[tuple[str, Any], ...] = ()
    gpu: GpuType | None = None  # --device-type: one node group of `num_nodes` GPU machines
    num_nodes: int = default("num_nodes")
    capacity: Capacity | None = None  # --spot, --flex-start, --reservation, --on-demand (elxpk/create/capacity.py)

    @property
    def elastic(self) -> bool:
        return self.elastic_slices > 0

    @property
    def worker_backoff_limit(self) -> int:
        """Pod restarts a slice's worker Job tolerates (elxpk/create/failure_policy.py, xpk's formula)."""
        return worker_backoff_limit(elastic=self.elastic, max_slice_restarts=self.max_slice_restarts,
                                    vms_per_slice=self.tpu.vms_per_slice if self.tpu else self.num_nodes)

    @property
    def trainer_job(self) -> str | None:
        """The replicatedJob whose pods run the user container, None when there is none (--headless)."""
        if not self.pathways:
            return "slice-job"
        return None if self.headless else "pathways-head"

    @property
    def slice_backend(self) -> str:
        return "pathways" if self.pathways else "multi-controller"

    def setting(self, name: str) -> Any:
        """A trainer setting as the trainer will see it: the value given, else the contract's default."""
        given = dict(self.settings)
        if name in given:
            return given[name]
        return setting_default(name)


class CreateOptions(NamedTuple):
    """How this `workload create` runs, apart from what it renders: nothing here changes the manifest."""

    dry_run: str | None = None  # None (submit), "client" (print only) or "server" (server-side dry run)
    replace: bool = default("replace")
    output_format: str = "yaml"
    output_manifest_file: str | None = None
    # Inputs of the checkpoint_period hint (seconds); the hint is printed when both are given.
    slice_mtbf_seconds: float | None = None
    step_time_seconds: float | None = None
    # Step, save and replacement times (--step-time, --checkpoint-save-time, --slice-replacement-time,
    # --from-run): the timeout and budget checks (elxpk/create/budget_checks.py) and the hint read them.
    times: Times | None = None


class Created(NamedTuple):
    """What `parse_create` returns: the spec, the invocation's options, and the warnings found on the way."""

    spec: WorkloadSpec
    options: CreateOptions
    warnings: tuple[str, ...] = ()

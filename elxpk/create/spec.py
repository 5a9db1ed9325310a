"""The one typed, frozen source of truth for `elxpk workload create`.

`WorkloadSpec.from_flags(...)` takes the raw flag values (strings as typed, so that every bad integer
is reported together with every other error, not one at a time by the parser), validates all of
them before any I/O, and raises one `UsageError` carrying one line per problem, each naming the
flag and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from elxpk.create.catalog import TpuType

if TYPE_CHECKING:
    from elxpk.create.budget_checks import Times
    from elxpk.create.gpu import GpuType

PRIORITIES = ("very-low", "low", "medium", "high", "very-high")
DEFAULT_PROXY_IMAGE = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:latest"
DEFAULT_SERVER_IMAGE = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:latest"
DEFAULT_GCS_LOCATION = "gs://cloud-pathways-staging/tmp"
DEFAULT_DOCKER_IMAGE = "python:3.10"  # xpk's --base-docker-image default
DEFAULT_QUEUE = "multislice-queue"  # the LocalQueue an xpk-made cluster has
TRAINER_COMMAND = "python -m trainer"
TRAINERS = ("elxpk", "maxtext")  # the values of --trainer: the bundled trainer, or a MaxText --command
# Env names the rendered manifest sets itself; a user value would silently shadow or be shadowed.
RESERVED_ENV = frozenset({"JAX_PLATFORMS", "JAX_BACKEND_TARGET", "PATHWAYS_HEAD", "XCLOUD_ENVIRONMENT",
                          "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID"})

ELASTIC_KNOBS_HELP = (
    "--elastic-slices is server-side tolerance (how many slices Pathways may lose without failing the "
    "program); --elastic-min-slice-count is client-side admission (how many healthy slices the trainer "
    "waits for before each attempt; -1 = all, i.e. pause and resume)"
)


@dataclass(frozen=True)
class WorkloadSpec:
    """Everything `workload create` was asked for, validated. Times are in seconds."""

    workload: str
    tpu: TpuType | None  # None for a GPU workload (--device-type): then `gpu` and `num_nodes`
    num_slices: int = 1
    command: str | None = None  # the user's shell command; with --trainer, the trainer command line
    docker_image: str = DEFAULT_DOCKER_IMAGE
    docker_name: str = "jax-tpu"
    pathways: bool = True
    headless: bool = False
    trainer: bool = False  # the bundled trainer (--trainer, --trainer elxpk)
    maxtext: bool = False  # --trainer maxtext: `command` is the MaxText command with elxpk's overrides added
    elastic_slices: int = 0
    max_slice_restarts: int = 1
    max_restarts: int = 0
    priority: str = "medium"
    queue: str = DEFAULT_QUEUE
    namespace: str = "default"
    termination_grace_period_seconds: int = 30
    ttl_seconds_after_finished: int = 43200
    proxy_server_image: str = DEFAULT_PROXY_IMAGE
    server_image: str = DEFAULT_SERVER_IMAGE
    worker_image: str = DEFAULT_SERVER_IMAGE
    pathways_gcs_location: str = DEFAULT_GCS_LOCATION
    custom_proxy_server_args: tuple[str, ...] = ()
    custom_server_args: tuple[str, ...] = ()
    custom_worker_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # --restart-on-exit-codes: codes restarted (counted) instead of failing the Job at once (xpk's flag).
    restart_on_exit_codes: tuple[int, ...] = ()
    # The trainer settings given as `workload create` flags: (name, value) in the contract table's order.
    # Names, defaults, bounds and help live in elxpk_contract.settings; nothing here repeats them.
    settings: tuple[tuple[str, Any], ...] = ()
    gpu: GpuType | None = None  # --device-type: one node group of `num_nodes` GPU machines
    num_nodes: int = 1
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def elastic(self) -> bool:
        return self.elastic_slices > 0

    @property
    def worker_backoff_limit(self) -> int:
        """xpk's formula, inherited from the PathwaysJob controller: pod restarts a slice's Job tolerates."""
        vms = self.tpu.vms_per_slice if self.tpu else self.num_nodes
        return self.max_slice_restarts * vms if self.elastic else 4 * vms

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
        from elxpk_contract.settings import default

        return default(name)

    @classmethod
    def from_flags(cls, **flags: object) -> WorkloadSpec:
        """Validate raw flag values (see elxpk/create/checks.py) into a spec, or raise UsageError with all errors.

        Only what the manifest depends on; the invocation's own options go through `parse_create`.
        """
        from elxpk.create.checks import OPTION_FLAGS, FlagChecker

        options = sorted(set(flags) & OPTION_FLAGS)
        if options:  # a programming error in the caller, not user input
            raise TypeError(f"WorkloadSpec.from_flags got invocation options {options}; use parse_create")
        return FlagChecker(flags).build()[0]


@dataclass(frozen=True)
class CreateOptions:
    """How this `workload create` runs, apart from what it renders: nothing here changes the manifest."""

    dry_run: str | None = None  # None (submit), "client" (print only) or "server" (server-side dry run)
    replace: bool = False
    output_format: str = "yaml"
    output_manifest_file: str | None = None
    # Inputs of the checkpoint_period hint (seconds); the hint is printed when both are given.
    slice_mtbf_seconds: float | None = None
    step_time_seconds: float | None = None
    # Step, save and replacement times (--step-time, --checkpoint-save-time, --slice-replacement-time,
    # --from-run): the timeout and budget checks (elxpk/create/budget_checks.py) and the hint read them.
    times: Times | None = None


def parse_create(**flags: object) -> tuple[WorkloadSpec, CreateOptions]:
    """Every `workload create` flag validated at once: the spec and the invocation options, or UsageError."""
    from elxpk.create.checks import FlagChecker

    return FlagChecker(flags).build()

"""What one attempt is handed and hands back: the context that survives between attempts (config,
backend, recorder, clock, data, compiled steps, policy and the live state), why an attempt starts, its
result, and the two signals an attempt raises to the loop (scale up; a resize that does not fit)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from elxpk_contract.settings import TrainerConfig
    from trainer.clock import Clock
    from trainer.core import step as steplib
    from trainer.data.data import DataSource
    from trainer.elastic import live_recovery
    from trainer.elastic.attempt_history import AttemptHistory
    from trainer.elastic.drain import DrainOutcome
    from trainer.elastic.policy import ElasticPolicy
    from trainer.elastic.preemption import StopRequest
    from trainer.elastic.progress import ProgressWriter
    from trainer.elastic.slice_health import RejoinGate
    from trainer.elastic.slices import SliceBackend
    from trainer.elastic.watchdog import StallWatchdog
    from trainer.elastic.writer_lease import WriterLease
    from trainer.metrics import RunRecorder
    from trainer.startup import StartupTimeline


class ScaleUpSignal(Exception):
    """A lost slice is back (resize mode): the current step is checkpointed, restart at full width."""


class ResizeDoesNotFit(Exception):
    """The step compiled for fewer slices needs more memory per device than a device has (a survivor carries
    the missing slices' shards): wait for more slices instead of failing the run."""

    def __init__(self, slices: list[int], needed_bytes: int, limit_bytes: int) -> None:
        super().__init__(f"the step on {len(slices)} slices needs {needed_bytes} bytes per device, "
                         f"a device has {limit_bytes}")
        self.slices, self.needed_bytes, self.limit_bytes = slices, needed_bytes, limit_bytes


@dataclass(frozen=True)
class AttemptRecovery:
    """Why this attempt starts: a failure or a scale-up, and when it was noticed."""

    reason: str  # "failure" or "scale_up"
    detected_at: float  # clock.monotonic() at detection
    lost: tuple[int, ...] = ()  # the slices the failure took down (their buffers are gone)


@dataclass
class AttemptContext:
    """What survives between attempts: config, backend, recorder, clock, data source, compiled steps, and
    the elastic policy that decides when to resize."""

    cfg: TrainerConfig
    backend: SliceBackend
    recorder: RunRecorder
    clock: Clock
    dataset: DataSource
    steps: steplib.StepCache
    policy: ElasticPolicy
    watchdog: StallWatchdog | None = None  # armed only inside the step loop
    progress: ProgressWriter | None = None  # CHECKPOINT_DIR/elxpk-progress.json
    history: AttemptHistory | None = None  # CHECKPOINT_DIR/elxpk-attempts.json: multi-controller's process 0
    stop: StopRequest | None = None  # set by SIGTERM: save and stop at the next step boundary
    attempt: int = 1
    current_step: int = 0
    latest_committed: int | None = None
    last_losses: dict[int, str] = field(default_factory=dict)
    blocking_s: list[float] = field(default_factory=list)
    live: live_recovery.LiveState | None = None  # the last completed step, kept for a live recovery (--recovery live)
    live_checks: live_recovery.Preparation | None = None  # the live checks, compiling in the background from the start
    live_checks_started: bool = False
    rejoin: RejoinGate | None = None  # the health check a returning slice passes before it receives the state
    stalled: bool = False  # the stall watchdog turned a hang into the failure now surfacing (trainer.elastic.stalls)
    drain: DrainOutcome | None = None  # a stop on SIGTERM: whether it saved, the steps it lost (progress record)
    timeline: StartupTimeline | None = None  # this process's start-up phases (trainer/startup.py)
    lease: WriterLease | None = None  # process 0's writer lease on the checkpoint directory


@dataclass
class AttemptResult:
    final_step: int
    params: dict[str, Any]  # host numpy copies: the device arrays are deleted when the attempt ends

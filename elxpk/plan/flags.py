"""`elxpk plan`'s own flags, declared once: type, default, bounds, help (elxpk/flag_rows.py's row type).

elxpk/cli/plan.py gets its Typer parameters from these rows (`with_flags`), PlanInputs (elxpk/plan/inputs.py)
reads each value with its row (`Flag.read`: the kind, the bounds, one line naming the flag) and takes the
defaults from here, and docs/planner.md's flag table is generated from them (`embed`). The settings
`plan` shares with the trainer (--num-slices, --max-to-keep, --checkpoint-period) are rows of the contract
table (`SHARED`, `setting_row`: read by the contract's rule, as the trainer reads them). PlanInputs reads
them into a `PlanValues` record (`READ`: the rows as it reads them).
"""

from __future__ import annotations

from typing import Any

from elxpk import accelerators, flag_rows
from elxpk import timing_flags as timing
from elxpk.flag_records import Record
from elxpk.flag_rows import DURATION, FLOAT, INT, OUTPUT, SIZE, TEXT, Flag, seed_row, setting_row
from elxpk_contract.settings import default as trainer_default

DEFAULT_PERIODS = (50, 100, 200, 500, 1000)  # the SLA table's rows without --periods
_PLAN = ("plan",)
_DUR = "a duration: 90s, 2h, 30d"
_REQUIRED = "else required"

FLAGS: tuple[Flag, ...] = (
    # The times `workload create` takes too: declared once (elxpk/timing_flags.py), plan's docs words here.
    timing.for_plan(timing.SLICE_MTBF, doc="mean time between failures of **one** slice; the job fails N times "
                    "as often", doc_default="required"),
    timing.for_plan(timing.STEP_TIME, doc="seconds per training step",
                    doc_default=f"the run's median step, {_REQUIRED}"),
    timing.for_plan(timing.CHECKPOINT_SAVE_TIME, doc="time a save **blocks** training (with async "
                    "checkpointing, only the blocking part).",
                    doc_default=f"the run's median `blocking_s`, {_REQUIRED}"),
    Flag("checkpoint_size", SIZE, "Bytes per checkpoint: 120GiB, 500MB.", commands=_PLAN,
         doc_default="the run's newest checkpoint; without it no storage figures"),
    Flag("restore", DURATION, "Time to restore the latest checkpoint.", commands=_PLAN,
         doc_default=f"the run's median restore, {_REQUIRED}"),
    # The demo: under 2 minutes from kill to next step, mostly pod scheduling.
    timing.for_plan(timing.SLICE_REPLACEMENT_TIME, default="100s", default_text="100s, or the run's",
                    doc="time to replace a pod and slice (failure detection included).",
                    doc_default="the run's median wait (real slices only), else `100s`"),
    Flag("image_pull", DURATION, "Non-elastic restart: image pull.", default="60s", commands=_PLAN,
         doc="the extra cost of a non-elastic full restart: the image pull"),
    # Every restart's attempt compiles its step (or loads it from the executable store) before its first step,
    # elastic or not: the run's `restore_done` `compile_s` measures it; 120 s is a cold compile of a
    # large model, pessimistic where the persistent cache serves the restart.
    Flag("compile", DURATION, "Each restart: compile (or executable load) before its first step.", default="120s",
         commands=_PLAN, default_text="120s, or the run's",
         doc="what each restart spends compiling its step (or loading it from the cache) before its first step, "
         "in every mode (the resize pays it twice: onto N-1 slices, then onto N)",
         doc_default="the run's median `compile_s` (its `restore_done` events), else `120s`"),
    Flag("price_per_gib_month", FLOAT, "Storage price, $/GiB-month.", default=0.02, low=0, commands=_PLAN,
         fix="dollars per GiB-month"),
    Flag("ttl", DURATION, "Bucket lifecycle: delete checkpoints older than this.", above=0, commands=_PLAN,
         doc="bucket lifecycle rule: objects older than this are deleted; one shorter than a save interval "
         "is a warning"),
    Flag("periods", TEXT, "SLA table rows.", metavar="N,N,...", commands=_PLAN,
         default_text=",".join(map(str, DEFAULT_PERIODS)),
         doc="rows of the SLA table (step counts); default rows shorter than one save are left out"),
    Flag("job_duration", DURATION, "Expected wall time of the job, for elastic_max_retries.", default="30d", above=0,
         commands=_PLAN, doc="expected wall time of the job, for the retry budget (`elastic_max_retries`)"),
    timing.for_plan(timing.FROM_RUN, doc="measure step, save, restore (and more) from a run directory"),
    Flag("plot", TEXT, "Write goodput against period to FILE.png.", metavar="FILE", commands=_PLAN, path=OUTPUT,
         doc="write goodput against period, one curve per mode, to a `.png`, `.svg` or `.pdf` file"),
    Flag("simulate", INT, "Also check the model with this many Monte Carlo trials.", default=0, low=0,
         high=100_000, commands=_PLAN, fix="Monte Carlo trials; 0 = no check", doc_default="`0` (off)"),
    Flag("weibull_shape", FLOAT, "Weibull shape of slice failures in --simulate (1 = exponential, <1 infant "
         "mortality).", default=1.0, low=0.1, high=20, commands=_PLAN, fix="1 = exponential"),
    seed_row("Seed of --simulate.", default=0, commands=_PLAN),
    Flag("job_mtbf", DURATION, "Mean time between whole-job failures (every slice or the controller); given, "
         "plans the live-replica mode (--recovery live), whose slice failures rewind nothing.", commands=_PLAN,
         doc="mean time between **whole-job** failures (every slice at once, the controller, the JobSet); "
         "given, the live-replica mode is shown and the recommended period is planned for it (see below)",
         doc_default="none: no live-replica mode"),
    # Live-replica recovery's reshard when not measured: the local bench rebuilds in ~0.03 s, a large state
    # over a data-center network moves at tens of GB/s per slice; 10 s errs high for most jobs.
    Flag("reshard", DURATION, "Live-replica: rebuilding the state from the survivors.", default="10s",
         commands=_PLAN, doc="live-replica: rebuilding the state from the survivors onto the new mesh"),
    # --accelerator and --chip-hour-price: declared once, for report, status and plan (elxpk/accelerators.py).
    *accelerators.FLAGS,
)

BY_NAME: dict[str, Flag] = {f.name: f for f in FLAGS}

# The trainer settings `plan` takes: the contract's rows (read by its rule, as the trainer reads them).
SHARED: tuple[Flag, ...] = (
    setting_row("num_slices", default=None, commands=_PLAN, extra=" in the job [the run's]",
                doc="slices in the job", doc_default=f"the run's (with `--from-run`), {_REQUIRED}"),
    setting_row("max_to_keep", default=None, commands=_PLAN,
                extra=f" [the run's, else {trainer_default('max_to_keep')}]",
                doc="checkpoints the manager keeps (a corrupt newest one needs a valid predecessor)",
                doc_default=f"the run's, else the trainer's default (`{trainer_default('max_to_keep')}`, "
                "from `elxpk_contract/settings.py`)"),
    setting_row("checkpoint_period", default=None, commands=_PLAN,
                extra=": your current setting, to compare",
                doc="your current setting: shown beside the recommendation", doc_default="the run's"),
)
# Every row of `plan`, in --help's and the docs table's order: the shared settings first.
ROWS: tuple[Flag, ...] = SHARED + FLAGS
# The costs a run may also give, flag over run over default (elxpk/plan/inputs.py `pick`): read without their
# default, so an omitted flag is None and the run's value comes before the default.
_RUN_BEFORE_DEFAULT = ("slice_replacement_time", "image_pull", "compile")
# The rows PlanInputs reads into PlanValues; --accelerator and --chip-hour-price are read together
# (elxpk/accelerators.py read_flags).
READ: tuple[Flag, ...] = tuple(row._replace(default=None) if row.name in _RUN_BEFORE_DEFAULT else row
                               for row in ROWS if row not in accelerators.FLAGS)


class PlanValues(Record):
    """`plan`'s values as READ reads them (elxpk/flag_records.py; tests/test_flag_records.py holds it to
    READ): a duration in seconds, a size in bytes. A row without a default is None when not given or refused
    (the refusal is its own line); a row with one reads its default then."""

    num_slices: int | None
    max_to_keep: int | None
    checkpoint_period: int | None
    slice_mtbf: float | None
    step_time: float | None
    checkpoint_save_time: float | None
    checkpoint_size: int | None
    restore: float | None
    slice_replacement_time: float | None  # given or None: the run's, then the default, come after
    image_pull: float | None  # given or None: as slice_replacement_time
    compile: float | None  # given or None: as slice_replacement_time
    price_per_gib_month: float
    ttl: float | None
    periods: str | None
    job_duration: float
    from_run: str | None
    plot: str | None
    simulate: int
    weibull_shape: float
    seed: int
    job_mtbf: float | None
    reshard: float


def default(name: str) -> Any:
    """The row's default as the planner uses it (a duration in seconds)."""
    return BY_NAME[name].read(None)[0]


BEGIN = "<!-- plan-flag-table:begin (generated from elxpk/plan/flags.py) -->"
END = "<!-- plan-flag-table:end -->"


def embed(page: str) -> str:
    """`page` with the text between BEGIN and END replaced by the current table (the shared settings first)."""
    return flag_rows.embed(page, ROWS, BEGIN, END)

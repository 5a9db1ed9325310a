"""The planner's options: raw flag text in, one frozen validated `PlanInputs` out, every error at once.

Values come from three places, in this order of precedence: a flag, the run given to --from-run,
a documented default. `PlanInputs.sources` says which one each value came from.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from elxpk.accelerators import Accelerator, Price, price_of, read_flags
from elxpk.errors import UsageError
from elxpk.flag_records import read_record
from elxpk.outfile import output_problem as path_problem
from elxpk.output_formats import OUTPUT_ROWS
from elxpk.plan import flags as table
from elxpk.plan.calibrate import Calibration, calibrate
from elxpk.plan.flags import DEFAULT_PERIODS, READ, PlanValues
from elxpk.plan.fmt import duration as format_duration
from elxpk.plan.model import Costs
from elxpk.plan.simulate import size_problem
from elxpk_contract.settings import bounds_problem, default, flag_name

# The defaults of the costs a run may also give (flag over run over default): their rows' (elxpk/plan/flags.py).
DEFAULTS = {
    "replacement_s": table.default("slice_replacement_time"),
    "image_pull_s": table.default("image_pull"),
    "compile_s": table.default("compile"),
    # Without --max-to-keep or a run: what the trainer keeps by default (the contract's settings table).
    "max_to_keep": default("max_to_keep"),
}
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


@dataclass(frozen=True)
class PlanFlags:
    """The flags of `elxpk plan` exactly as typed (text, or a value already typed); None: not given.
    Each own flag is read with its row of elxpk/plan/flags.py, which holds its default."""

    num_slices: int | str | None = None
    slice_mtbf: str | None = None
    step_time: str | None = None
    checkpoint_save_time: str | None = None
    checkpoint_size: str | None = None
    restore: str | None = None
    slice_replacement_time: str | None = None
    image_pull: str | None = None
    compile: str | None = None
    price_per_gib_month: str | float | None = None
    max_to_keep: int | str | None = None
    ttl: str | None = None
    checkpoint_period: int | str | None = None
    periods: str | None = None
    job_duration: str | None = None
    from_run: str | None = None
    output: str = "table"
    plot: str | None = None
    simulate: str | int | None = None
    weibull_shape: str | float | None = None
    seed: str | int | None = None
    job_mtbf: str | None = None  # whole-job failures: given, the live-replica mode is planned for
    reshard: str | None = None
    accelerator: str | None = None  # chips per slice, for chip-hours and money
    chip_hour_price: str | float | None = None


@dataclass(frozen=True)
class PlanInputs:
    costs: Costs
    checkpoint_size_bytes: float | None
    price_per_gib_month: float
    max_to_keep: int
    ttl_s: float | None
    periods: tuple[int, ...]
    omitted_periods: tuple[int, ...]
    checkpoint_period: int | None
    job_duration_s: float
    output: str
    plot: Path | None
    simulate_trials: int
    weibull_shape: float
    seed: int
    sources: dict[str, str] = field(default_factory=dict)
    calibration: Calibration | None = None
    accelerator: Accelerator | None = None  # given: chip-hours (chips per slice x --num-slices)
    price: Price | None = None  # given or listed for the accelerator: money

    @classmethod
    def from_flags(
        cls, flags: PlanFlags, *, calibrate: Callable[[str], Calibration] | None = None
    ) -> PlanInputs:
        return _Resolver(flags, calibrate).resolve()


class _Resolver:
    """Collects every error before raising, so one run of the command shows all of them."""

    def __init__(self, flags: PlanFlags, calibrate: Callable[[str], Calibration] | None) -> None:
        self.flags = flags
        self.calibrate = calibrate
        self.sources: dict[str, str] = {}
        # Every flag read at once by its row (elxpk/plan/flags.py READ: kind and bounds, a trainer setting's by
        # the contract's rule), one error line per refused value; refused or not given, a row without a
        # default reads as None (PlanValues).
        self.values, self.errors = read_record(PlanValues, READ,
                                               {name: getattr(flags, name) for name in PlanValues.fields()})

    def pick(self, name: str, flag_value, run_value, default=None):
        """Flag over run over default; records where the value came from."""
        for source, value in (("flag", flag_value), ("run", run_value), ("default", default)):
            if value is not None:
                self.sources[name] = source
                return value
        return None

    def resolve(self) -> PlanInputs:
        f, v = self.flags, self.values
        mtbf, job_mtbf, reshard = v.slice_mtbf, v.job_mtbf, v.reshard
        periods = self.parse_periods(f.periods)
        output, problem = OUTPUT_ROWS["plan"].read(f.output)  # -o's row (elxpk/output_formats.py), its one reader
        if problem:
            self.errors.append(problem)
        plot = self.check_plot(f.plot)
        accelerator, chip_price, problems = read_flags({"accelerator": f.accelerator,
                                                        "chip_hour_price": f.chip_hour_price})
        self.errors.extend(problems)

        cal = self.read_run(f.from_run)
        run = cal or Calibration.empty()
        num_slices = self.pick("num_slices", v.num_slices, run.num_slices)
        step = self.pick("step_time_s", v.step_time, run.step_time_s)
        save = self.pick("save_s", v.checkpoint_save_time, run.save_s)
        restore = self.pick("restore_s", v.restore, run.restore_s)
        replacement = self.pick("replacement_s", v.slice_replacement_time, run.replacement_s,
                                DEFAULTS["replacement_s"])
        image_pull = self.pick("image_pull_s", v.image_pull, None, DEFAULTS["image_pull_s"])
        compile_s = self.pick("compile_s", v.compile, run.compile_s, DEFAULTS["compile_s"])
        size = self.pick("checkpoint_size_bytes", v.checkpoint_size, run.checkpoint_size_bytes)
        max_to_keep = self.pick("max_to_keep", v.max_to_keep, run.max_to_keep, DEFAULTS["max_to_keep"])
        current = self.pick("checkpoint_period", v.checkpoint_period, run.checkpoint_period)

        if f.from_run is None:
            need_run = " (or --from-run RUN_DIR)"
        else:  # an unreadable run already has its own error line
            need_run = " (the --from-run run has no sample of it)" if cal else ""
        self.positive("--slice-mtbf", mtbf, "30d", "")
        self.positive("--step-time", step, "2.5s", need_run)
        self.positive("--checkpoint-save-time", save, "20s", need_run)
        self.non_negative("--restore", restore, "90s", need_run)
        self.non_negative("--slice-replacement-time", replacement, "100s", "")
        self.non_negative("--image-pull", image_pull, "60s", "")
        self.non_negative("--compile", compile_s, "120s", "")
        if job_mtbf is not None:
            self.positive("--job-mtbf", job_mtbf, "90d", "")
        self.non_negative("--reshard", reshard, "10s", "")  # omitted or refused: its default, 10s
        if num_slices is None:
            if f.num_slices is None:  # a refused one has its line already
                self.errors.append(f"--num-slices is required{need_run}: give the number of slices, e.g. 32")
        else:
            self.setting_bounds("num_slices", num_slices)
        self.setting_bounds("max_to_keep", max_to_keep)  # >= 2, as the trainer requires
        if size is not None and size < 0:
            self.errors.append(f"--checkpoint-size must be >= 0 (got {f.checkpoint_size!r})")
        if current is not None:
            self.setting_bounds("checkpoint_period", current)

        omitted: tuple[int, ...] = ()
        if not self.errors:
            if current is not None and self.sources.get("checkpoint_period") == "run" and current * step <= save:
                # The run's own period need not fit the costs being planned for: left out, not refused.
                omitted, current = (current,), None
            self.check_save_fits(save, step, mtbf, num_slices, current, periods)
            if job_mtbf is not None and save >= job_mtbf:  # the bound --slice-mtbf has, for whole-job failures
                self.errors.append(
                    f"--job-mtbf {f.job_mtbf}: not longer than --checkpoint-save-time {format_duration(save)}: no checkpoint would finish between whole-job failures; "
                    "check both values")
            if f.periods is None:
                omitted += tuple(p for p in periods if p * step <= save)
                periods = tuple(p for p in periods if p * step > save)
        if self.errors:
            raise UsageError(*self.errors)
        # Each of these is checked above (a missing one is an error line), so none is None here.
        assert mtbf is not None and step is not None and save is not None
        costs = Costs(
            num_slices=num_slices,
            slice_mtbf_s=mtbf,
            step_time_s=step,
            save_s=save,
            restore_s=restore,
            replacement_s=replacement,
            image_pull_s=image_pull,
            compile_s=compile_s,
            job_mtbf_s=job_mtbf,
            reshard_s=reshard,
        )
        too_large = size_problem(costs, v.simulate)  # refused before anything is simulated or written
        if too_large:
            raise UsageError(too_large)
        return PlanInputs(
            costs=costs,
            checkpoint_size_bytes=size,
            price_per_gib_month=v.price_per_gib_month,
            max_to_keep=max_to_keep,
            ttl_s=v.ttl,
            periods=periods,
            omitted_periods=omitted,
            checkpoint_period=current,
            job_duration_s=v.job_duration,
            output=output,
            plot=plot,
            simulate_trials=v.simulate,
            weibull_shape=v.weibull_shape,
            seed=v.seed,
            sources=dict(self.sources),
            calibration=cal,
            accelerator=accelerator,
            price=price_of(accelerator, chip_price),
        )

    def setting_bounds(self, name: str, value: int) -> None:
        """A trainer setting within the contract's bounds (elxpk_contract/settings.py), with the trainer's
        message; a value from --from-run's run.json is named as such."""
        source = flag_name(name) if self.sources.get(name) != "run" else f"--from-run run.json {name}"
        problem = bounds_problem(name, value, source)
        if problem:
            self.errors.append(problem)

    def positive(self, flag: str, value: float | None, example: str, alt: str) -> None:
        if value is None:
            if not any(e.startswith(flag) for e in self.errors):
                self.errors.append(f"{flag} is required{alt}: give a duration such as {example}")
        elif not (value > 0 and math.isfinite(value)):
            self.errors.append(f"{flag} must be a positive duration such as {example} (got {value:g}s)")

    def non_negative(self, flag: str, value: float | None, example: str, alt: str) -> None:
        if value is None:
            if not any(e.startswith(flag) for e in self.errors):
                self.errors.append(f"{flag} is required{alt}: give a duration such as {example}")
        elif not (value >= 0 and math.isfinite(value)):
            self.errors.append(f"{flag} must be a duration >= 0 such as {example} (got {value:g}s)")

    def parse_periods(self, text: str | None) -> tuple[int, ...]:
        if text is None:
            return DEFAULT_PERIODS
        try:
            values = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
        except ValueError:
            self.errors.append(f"--periods: {text!r} is not a comma-separated list of step counts such as 50,100,200")
            return DEFAULT_PERIODS
        if not values or values[0] < 1:
            self.errors.append(f"--periods: every period must be a whole number of steps >= 1 (got {text!r})")
            return DEFAULT_PERIODS
        return values

    def check_plot(self, text: str | None) -> Path | None:
        if text is None:
            return None

        problem = path_problem(text, "--plot", suffixes=PLOT_SUFFIXES, example="goodput.png")
        if problem:
            self.errors.append(problem)
        return Path(text)

    def read_run(self, text: str | None) -> Calibration | None:
        if text is None:
            return None
        if self.calibrate is None:
            self.calibrate = calibrate
        try:
            return self.calibrate(text)
        except UsageError as exc:
            self.errors.extend(exc.messages)
            return None

    def check_save_fits(self, save, step, mtbf, num_slices, current, periods) -> None:
        """A save must fit inside the compute between saves, and well inside the system MTBF."""
        system_mtbf = mtbf / num_slices
        if save >= system_mtbf:
            self.errors.append(
                f"--checkpoint-save-time {format_duration(save)} is not shorter than the system MTBF "
                f"{format_duration(system_mtbf)} (--slice-mtbf / --num-slices): no checkpoint would ever "
                "finish; check both values"
            )
        if current is not None and current * step <= save:
            self.errors.append(
                f"--checkpoint-save-time {format_duration(save)} is slower than --checkpoint-period {current} x "
                f"--step-time {format_duration(step)} = {format_duration(current * step)}: raise the period "
                "or shorten the save"
            )
        if self.flags.periods is not None:
            short = [p for p in periods if p * step <= save]
            if short:
                self.errors.append(
                    f"--periods {','.join(map(str, short))}: a save ({format_duration(save)}) is slower than "
                    f"that many steps of {format_duration(step)}; drop them or use longer periods"
                )

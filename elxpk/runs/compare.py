"""Exact comparison of two runs: per-step loss bits and example ids (the Olmo 3 data-loader lesson).

Only the record that counts for each step is compared (the last one written). Losses are compared as
float32 bit patterns (float64 when both runs are MaxText metrics files, which hold float64 text); the
relative difference is |a - b| / max(|a|, |b|). A NaN or infinite loss in either run is a divergence even
when both runs have the same bits there: a run that blew up matches nothing. Arrays are sized by the
steps recorded, never indexed by step number.

Either run may be a MaxText metrics file (elxpk/maxtext/metrics.py). It has no example ids, so for it
exactly-once data and the per-step data order cannot be checked: the comparison lists that under
`not_checked` and prints it, rather than passing it silently.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any

import numpy as np

from elxpk.columns import Column
from elxpk.maxtext.metrics import MaxTextMetrics
from elxpk.runs.examples import ExampleAccount, account_columns
from elxpk.runs.rundir import Run
from elxpk.runs.words import plural
from elxpk_contract.setting_rules import FIELDS, flag_name

ELXPK_RUN = "elxpk run"
MAXTEXT_FILE = "MaxText metrics file"


@dataclass(frozen=True)
class Series:
    """One side of a comparison: the loss that counts at each step, and its example ids when it has any,
    as columns in ascending step order (a run of millions of steps in ~32 bytes a step)."""

    path: str
    kind: str  # ELXPK_RUN or MAXTEXT_FILE
    steps: array  # the steps, ascending, each once
    loss: array  # the loss of the record that counts at each step
    examples: tuple[array, array] | None  # [first, end) of each step's example ids; None: the run has none
    redone: int  # steps written more than once (redone after a restore)

    @classmethod
    def of(cls, run: Run | MaxTextMetrics | Series) -> Series:
        if isinstance(run, Series):
            return run
        if isinstance(run, MaxTextMetrics):
            return cls(run.path, MAXTEXT_FILE, run.steps.values, run.loss.values, None, len(run.repeated_steps))
        m = run.metrics
        order = run.final_indices()
        return cls(str(run.path), ELXPK_RUN, array("q", (m.step[i] for i in order)),
                   array("d", (m.loss[i] for i in order)),
                   (array("q", (m.first[i] for i in order)), array("q", (m.end[i] for i in order))),
                   len(m.redone_steps()))


@dataclass(frozen=True)
class Comparison:
    run_a: str
    run_b: str
    rtol: float
    steps: Column  # steps both runs executed, ascending
    loss_a: Column  # floats
    loss_b: Column
    only_a: int  # steps only one run has (a shorter run is compared on its prefix)
    only_b: int
    bitwise_equal: int  # common steps whose float32 losses have identical bits
    first_divergent_step: int | None  # first step whose bits differ
    first_beyond_rtol_step: int | None
    max_abs_diff: float
    max_rel_diff: float
    data_order_mismatches: int  # common steps that consumed different example ranges
    first_data_mismatch_step: int | None
    first_nonfinite_a: int | None  # first step (of all that count) whose loss is NaN or infinite
    first_nonfinite_b: int | None
    examples_a: ExampleAccount | None  # None: the run has no example ids (a MaxText metrics file)
    examples_b: ExampleAccount | None
    kind_a: str = ELXPK_RUN
    kind_b: str = ELXPK_RUN
    redone_a: int = 0  # steps a run wrote more than once; the last record of each counts
    redone_b: int = 0
    # The settings whose values decide the losses (the checkpoint fingerprint's fields, run.json) that differ
    # between the runs: (name, value in A, value in B); empty when they agree or a run has no run.json.
    settings_differ: tuple[tuple[str, Any, Any], ...] = ()

    def not_checked(self) -> list[str]:
        """What this comparison cannot check, one line each (said plainly, never passed silently)."""
        out = [f"exactly-once data in run {name}: a {MAXTEXT_FILE} has no example ids"
               for name, ex in (("A", self.examples_a), ("B", self.examples_b)) if ex is None]
        if out:
            out.append("data order (the same examples at each step in both runs): it needs example ids in both")
        return out

    def failures(self) -> list[str]:
        """Why the comparison fails, one line each; empty when it passes."""
        out = []
        if not self.steps:
            out.append("the runs have no step in common")
        for name, step in (("A", self.first_nonfinite_a), ("B", self.first_nonfinite_b)):
            if step is not None:
                out.append(f"run {name} diverged: its loss is not finite (NaN or infinite) from step {step}")
        if self.first_beyond_rtol_step is not None:
            out.append(
                f"losses diverge beyond --rtol {self.rtol:g} from step {self.first_beyond_rtol_step} "
                f"(max rel diff {self.max_rel_diff:.3g})"
            )
        for name, ex in (("A", self.examples_a), ("B", self.examples_b)):
            if ex is None:
                continue
            if ex.duplicates:
                out.append(f"run {name} consumed {plural(ex.duplicates, 'example')} more than once, first at ids "
                           f"{_ranges(ex.duplicate_ranges)}")
            if ex.gaps:
                out.append(f"run {name} never consumed {plural(ex.gaps, 'example')}, first at ids "
                           f"{_ranges(ex.gap_ranges)}")
        if self.data_order_mismatches:
            steps = plural(self.data_order_mismatches, "step")
            out.append(f"{steps} consumed different examples in the two runs, first at step "
                       f"{self.first_data_mismatch_step}")
        return out

    @property
    def passed(self) -> bool:
        return not self.failures()

    def to_dict(self) -> dict:
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "rtol": self.rtol,
            "common_steps": len(self.steps),
            "only_a": self.only_a,
            "only_b": self.only_b,
            "bitwise_equal_steps": self.bitwise_equal,
            "bitwise_equal": len(self.steps) > 0 and self.bitwise_equal == len(self.steps),
            "first_divergent_step": self.first_divergent_step,
            "first_beyond_rtol_step": self.first_beyond_rtol_step,
            "max_abs_diff": self.max_abs_diff,
            "max_rel_diff": self.max_rel_diff,
            "data_order_mismatches": self.data_order_mismatches,
            "first_data_mismatch_step": self.first_data_mismatch_step,
            "first_nonfinite_a": self.first_nonfinite_a,
            "first_nonfinite_b": self.first_nonfinite_b,
            "kind_a": self.kind_a,
            "kind_b": self.kind_b,
            "redone_steps_a": self.redone_a,
            "redone_steps_b": self.redone_b,
            "examples_a": self.examples_a.to_dict() if self.examples_a is not None else None,
            "examples_b": self.examples_b.to_dict() if self.examples_b is not None else None,
            "settings_differ": {name: [a, b] for name, a, b in self.settings_differ},
            "passed": self.passed,
            "failures": self.failures(),
            "not_checked": self.not_checked(),
        }


def _ranges(ranges: tuple[tuple[int, int], ...]) -> str:
    return ", ".join(f"[{lo}, {hi})" for lo, hi in ranges[:3])


def _first(mask: np.ndarray, steps: np.ndarray) -> int | None:
    hits = np.flatnonzero(mask)
    return int(steps[hits[0]]) if hits.size else None


def _floats(values: np.ndarray, dtype: type = np.float32) -> np.ndarray:
    with np.errstate(over="ignore"):  # a value beyond float32's range is inf, as the trainer would see it
        return values.astype(dtype)


def _column(values: array, dtype: type) -> np.ndarray:
    return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype=dtype)


def _first_nonfinite(s: Series, dtype: type = np.float32) -> int | None:
    bad = np.flatnonzero(~np.isfinite(_floats(_column(s.loss, np.float64), dtype)))
    return s.steps[int(bad[0])] if bad.size else None


def compare_runs(a: Run | MaxTextMetrics | Series, b: Run | MaxTextMetrics | Series, *,
                 rtol: float = 0.0) -> Comparison:
    """Compare two runs, each an elxpk run directory or a MaxText metrics file (see `Series`)."""
    return compare_series(Series.of(a), Series.of(b), rtol=rtol)


def compare_series(a: Series, b: Series, *, rtol: float = 0.0) -> Comparison:
    # The bundled trainer records float32 losses; MaxText's file holds float64 text (of float32 values,
    # normally): float32 bits whenever an elxpk run takes part, float64 bits for MaxText against MaxText.
    dtype = np.float64 if a.kind == b.kind == MAXTEXT_FILE else np.float32
    bits = np.uint64 if dtype is np.float64 else np.uint32
    steps_a, steps_b = _column(a.steps, np.int64), _column(b.steps, np.int64)
    # Both ascending, each step once: where each of A's steps is in B, and whether it is there.
    at_b = np.searchsorted(steps_b, steps_a)
    found = at_b < steps_b.size
    found[found] = steps_b[at_b[found]] == steps_a[found]
    in_a, in_b = np.flatnonzero(found), at_b[found]
    del at_b, found
    steps = steps_a[in_a]
    la = _floats(_column(a.loss, np.float64)[in_a], dtype)
    lb = _floats(_column(b.loss, np.float64)[in_b], dtype)
    same_bits = la.view(bits) == lb.view(bits)
    # The differences of the steps whose bits differ (usually few: no per-step table of zeros to hold).
    differ = np.flatnonzero(~same_bits)
    da, db = la[differ], lb[differ]
    with np.errstate(invalid="ignore", divide="ignore"):
        abs_diff = np.abs(da.astype(np.float64) - db.astype(np.float64))
        scale = np.maximum(np.abs(da), np.abs(db)).astype(np.float64)
        rel_diff = np.where(scale > 0, abs_diff / scale, np.where(np.isnan(scale), np.nan, 0.0))
    # NaN in only one run (or two different NaNs) is a divergence of any size.
    rel_diff = np.nan_to_num(rel_diff, nan=np.inf)
    abs_diff = np.nan_to_num(abs_diff, nan=np.inf)
    beyond = differ[rel_diff > rtol]
    if a.examples is not None and b.examples is not None:
        order = np.zeros(len(steps), dtype=np.bool_)
        for ex_a, ex_b in zip(a.examples, b.examples, strict=True):
            order |= _column(ex_a, np.int64)[in_a] != _column(ex_b, np.int64)[in_b]
    else:
        order = np.zeros(len(steps), dtype=np.bool_)
    return Comparison(
        run_a=a.path,
        run_b=b.path,
        rtol=rtol,
        steps=Column(array("q", steps.tobytes())),
        loss_a=Column(array("d", la.astype(np.float64).tobytes())),
        loss_b=Column(array("d", lb.astype(np.float64).tobytes())),
        only_a=len(a.steps) - len(steps),
        only_b=len(b.steps) - len(steps),
        bitwise_equal=int(same_bits.sum()),
        first_divergent_step=int(steps[differ[0]]) if differ.size else None,
        first_beyond_rtol_step=int(steps[beyond[0]]) if beyond.size else None,
        max_abs_diff=float(abs_diff.max()) if abs_diff.size else 0.0,
        max_rel_diff=float(rel_diff.max()) if rel_diff.size else 0.0,
        data_order_mismatches=int(order.sum()),
        first_data_mismatch_step=_first(order, steps),
        first_nonfinite_a=_first_nonfinite(a, dtype),
        first_nonfinite_b=_first_nonfinite(b, dtype),
        examples_a=account_columns(a.steps, *a.examples) if a.examples is not None else None,
        examples_b=account_columns(b.steps, *b.examples) if b.examples is not None else None,
        kind_a=a.kind,
        kind_b=b.kind,
        redone_a=a.redone,
        redone_b=b.redone,
    )


def render_text(c: Comparison) -> list[str]:
    n = len(c.steps)
    lines = [f"A {c.run_a}{_kind(c.kind_a)}", f"B {c.run_b}{_kind(c.kind_b)}"]
    extra = f" (+{c.only_a} only in A, +{c.only_b} only in B)" if c.only_a or c.only_b else ""
    lines.append(f"steps compared: {n}{extra}")
    if n and c.bitwise_equal == n:
        lines.append("loss: bitwise equal at every step")
    else:
        lines.append(
            f"loss: {c.bitwise_equal}/{n} steps bitwise equal; first divergent step {c.first_divergent_step}; "
            f"max abs diff {c.max_abs_diff:.3g}, max rel diff {c.max_rel_diff:.3g}"
        )
    for name, ex in (("A", c.examples_a), ("B", c.examples_b)):
        if ex is None:
            lines.append(f"examples {name}: NOT CHECKED: a {MAXTEXT_FILE} has no example ids, so whether each "
                         f"example was consumed exactly once cannot be checked")
            continue
        state = ("each exactly once" if ex.exactly_once
                 else f"{plural(ex.duplicates, 'duplicate')}, {plural(ex.gaps, 'gap')}")
        lines.append(f"examples {name}: {ex.unique} ids over {plural(ex.steps, 'step')}, {state}")
    for name, redone, kind in (("A", c.redone_a, c.kind_a), ("B", c.redone_b, c.kind_b)):
        if redone and kind == MAXTEXT_FILE:
            lines.append(f"note: run {name} wrote {plural(redone, 'step')} twice (redone after a restore); "
                         f"the last line of each step is compared")
    if c.settings_differ:
        lines.append("settings that differ (they decide the losses): " + ", ".join(
            f"{name} {a!r:.60} in A, {b!r:.60} in B" for name, a, b in c.settings_differ))
    failures = c.failures()
    unchecked = c.not_checked()
    lines.append("result: " + ("MISMATCH" if failures else "match on losses only" if unchecked else "match"))
    lines.extend(f"  - {f}" for f in failures)
    lines.extend(f"  - not checked: {u}" for u in unchecked)
    return lines


def settings_differ(a: Any, b: Any) -> tuple[tuple[str, Any, Any], ...]:
    """The loss-deciding settings (run.json's `fingerprint_fields`, given for each run) whose values differ
    between two runs, each named as the trainer's flag (`--seed`; the data as `--data`); empty when either has
    no run.json."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return ()
    names = sorted(set(a) | set(b))
    return tuple((flag_name(n) if n in FIELDS else "--data" if n == "dataset" else n, a.get(n), b.get(n))
                 for n in names if a.get(n) != b.get(n))


def _kind(kind: str) -> str:
    return f" ({kind})" if kind == MAXTEXT_FILE else ""

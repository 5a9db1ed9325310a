"""Exact comparison of two runs: per-step loss bits and example ids (the Olmo 3 data-loader lesson).

Only the record that counts for each step is compared (the last one written). Losses are compared as
float32 bit patterns; the relative difference is |a - b| / max(|a|, |b|). A NaN or infinite loss in either
run is a divergence even when both runs have the same bits there: a run that blew up matches nothing.
Arrays are sized by the steps recorded, never indexed by step number.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from elxpk.runs.examples import ExampleAccount, account
from elxpk.runs.rundir import Run
from elxpk.runs.words import plural
from elxpk_contract.records import Metric


@dataclass(frozen=True)
class Comparison:
    run_a: str
    run_b: str
    rtol: float
    steps: tuple[int, ...]  # steps both runs executed, ascending
    loss_a: tuple[float, ...]
    loss_b: tuple[float, ...]
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
    examples_a: ExampleAccount
    examples_b: ExampleAccount

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
            "bitwise_equal": bool(self.steps) and self.bitwise_equal == len(self.steps),
            "first_divergent_step": self.first_divergent_step,
            "first_beyond_rtol_step": self.first_beyond_rtol_step,
            "max_abs_diff": self.max_abs_diff,
            "max_rel_diff": self.max_rel_diff,
            "data_order_mismatches": self.data_order_mismatches,
            "first_data_mismatch_step": self.first_data_mismatch_step,
            "first_nonfinite_a": self.first_nonfinite_a,
            "first_nonfinite_b": self.first_nonfinite_b,
            "examples_a": self.examples_a.to_dict(),
            "examples_b": self.examples_b.to_dict(),
            "passed": self.passed,
            "failures": self.failures(),
        }


def _ranges(ranges: tuple[tuple[int, int], ...]) -> str:
    return ", ".join(f"[{lo}, {hi})" for lo, hi in ranges[:3])


def _first(mask: np.ndarray, steps: np.ndarray) -> int | None:
    hits = np.flatnonzero(mask)
    return int(steps[hits[0]]) if hits.size else None


def _float32(values: list[float]) -> np.ndarray:
    with np.errstate(over="ignore"):  # a value beyond float32's range is inf, as the trainer would see it
        return np.asarray(values, dtype=np.float32)


def _first_nonfinite(final: dict[int, Metric]) -> int | None:
    if not final:
        return None
    bad = np.flatnonzero(~np.isfinite(_float32([r.loss_value for r in final.values()])))
    return list(final)[bad[0]] if bad.size else None


def compare_runs(a: Run, b: Run, *, rtol: float = 0.0) -> Comparison:
    final_a, final_b = a.final_records(), b.final_records()
    common = sorted(set(final_a) & set(final_b))
    steps = np.asarray(common, dtype=np.int64)
    la = _float32([final_a[s].loss_value for s in common])
    lb = _float32([final_b[s].loss_value for s in common])
    same_bits = la.view(np.uint32) == lb.view(np.uint32)
    with np.errstate(invalid="ignore", divide="ignore"):
        abs_diff = np.abs(la.astype(np.float64) - lb.astype(np.float64))
        scale = np.maximum(np.abs(la), np.abs(lb)).astype(np.float64)
        rel_diff = np.where(scale > 0, abs_diff / scale, 0.0)
    # NaN in only one run (or two different NaNs) is a divergence of any size.
    rel_diff = np.where(same_bits, 0.0, np.nan_to_num(rel_diff, nan=np.inf))
    abs_diff = np.where(same_bits, 0.0, np.nan_to_num(abs_diff, nan=np.inf))
    beyond = ~same_bits & (rel_diff > rtol)
    order = np.asarray([final_a[s].examples != final_b[s].examples for s in common], dtype=bool)
    return Comparison(
        run_a=str(a.path),
        run_b=str(b.path),
        rtol=rtol,
        steps=tuple(common),
        loss_a=tuple(float(v) for v in la),
        loss_b=tuple(float(v) for v in lb),
        only_a=len(set(final_a) - set(final_b)),
        only_b=len(set(final_b) - set(final_a)),
        bitwise_equal=int(same_bits.sum()),
        first_divergent_step=_first(~same_bits, steps),
        first_beyond_rtol_step=_first(beyond, steps),
        max_abs_diff=float(abs_diff.max()) if abs_diff.size else 0.0,
        max_rel_diff=float(rel_diff.max()) if rel_diff.size else 0.0,
        data_order_mismatches=int(order.sum()),
        first_data_mismatch_step=_first(order, steps),
        first_nonfinite_a=_first_nonfinite(final_a),
        first_nonfinite_b=_first_nonfinite(final_b),
        examples_a=account(final_a),
        examples_b=account(final_b),
    )


def render_text(c: Comparison) -> list[str]:
    n = len(c.steps)
    lines = [f"A {c.run_a}", f"B {c.run_b}"]
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
        state = ("each exactly once" if ex.exactly_once
                 else f"{plural(ex.duplicates, 'duplicate')}, {plural(ex.gaps, 'gap')}")
        lines.append(f"examples {name}: {ex.unique} ids over {plural(ex.steps, 'step')}, {state}")
    failures = c.failures()
    lines.append("result: " + ("match" if not failures else "MISMATCH"))
    lines.extend(f"  - {f}" for f in failures)
    return lines

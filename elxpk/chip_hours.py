"""Badput in chip-hours and money: spent = useful + lost, the lost split by cause, exactly.

What is billed (the assumption every figure rests on): every slice's chips are held for the run's whole
wall time, a lost slice's included: its chips (or the replacement's) stay reserved while it is replaced,
as with a reservation or a node pool that is recreated in place. The wall time is `billed_s`'s, the one
rule `report`, `workload status` and the succeeded/failed alerts all use: from the trainer's first start
(its first `run_started`) to its end (its last record), the gaps after a session that finished cleanly
left out; queueing is not billed (the chips are not yet the run's). Seconds become chip-hours as
chips x seconds / 3600.

Every figure is a whole number of 2^-20 chip-hours (about 3.4 chip-milliseconds; money likewise in 2^-20
USD; a coarser power of two for sums past 2^30, so that every sum stays a float's whole number), so the
JSON's floats add up to the bit: spent == useful + lost and lost == the sum of its causes, with `other`
taking what the named causes leave (rounding included). The text rounds for people and
apportions the rounding (largest remainder), so its figures add up too, to the last digit shown.
Ground of the stages: standard library and elxpk.accelerators only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from elxpk.accelerators import Price

UNITS = 2**20  # units per chip-hour (and per USD) at most: dyadic, so float sums of figures are exact
_EXACT = 2**50  # below 2**53 (a float's whole numbers) with room for the sums of every part
# The causes of lost chip-hours, in the order shown: (key in JSON, words).
CAUSES = (
    ("recovery", "recovery (restore + rebuild)"),
    ("rewind", "rewound steps"),
    ("checkpoint", "checkpoint blocking"),
    ("waiting", "waiting for a slice"),
    ("compile", "compile"),
    ("other", "start-up and other"),
)
BILLED = ("every slice's chips are billed for the whole wall time, a lost slice's included (its capacity "
          "stays reserved while it is replaced)")
# The wall time that BILLED speaks of, where the trainer's records give it (billed_s); queueing is not in it.
FROM_TRAINER = "; from the trainer's first start to its end (its records; queueing not billed)"


@dataclass(frozen=True)
class Session:
    """One stretch of the run's records: its first record's time, its last one's, and whether it finished
    cleanly (run_finished: nothing held chips for the run until the next session started)."""

    start: float
    end: float
    finished: bool = False


def billed_s(sessions: Iterable[Session]) -> float:
    """The seconds billed for a run's sessions, in time order: from each stretch's first start to its last
    end, a stretch running on through every session that did not finish cleanly (a crash, a pod restart:
    the chips stayed the run's). One subtraction per stretch, so the same two timestamps, read from the
    run records (`report`) or from the progress record (`workload status`, the alerts), give the same float."""
    total = 0.0
    start: float | None = None
    end: float | None = None
    for session in sessions:
        start = session.start if start is None else start
        end = session.end if end is None else max(end, session.end)
        if session.finished:
            total += max(0.0, end - start)
            start = end = None
    if start is not None and end is not None:
        total += max(0.0, end - start)
    return total


@dataclass(frozen=True)
class Holding:
    """The chips billed: `chips` in all, of `unit` ("chip", "GPU", or "device" when the type is unknown)."""

    chips: int
    unit: str
    what: str  # e.g. "2 slices x 8 chips of v5p-16"
    hint: str = ""  # how to get chip-hours, when these are not

    @property
    def hours_word(self) -> str:
        return f"{self.unit}-hours"


@dataclass(frozen=True)
class ChipHours:
    holding: Holding
    wall_s: float
    units: int  # per unit-hour: a power of two, UNITS or less for very large figures
    spent: int  # in 1/units unit-hours
    useful: int
    lost_by_cause: dict[str, int]  # every key of CAUSES, in its order
    price: Price | None = None
    money: dict[str, int] | None = None  # spent, useful and each cause, in 1/money_units USD
    money_units: int = UNITS
    billed: str = BILLED  # what is billed, and for how long (report's and status's interval: FROM_TRAINER)

    @property
    def lost(self) -> int:
        return sum(self.lost_by_cause.values())

    def to_dict(self) -> dict:
        h = self.holding
        out: dict = {
            "unit": h.hours_word, "chips": h.chips, "held": h.what, "wall_s": self.wall_s, "billed": self.billed,
            "spent": self.spent / self.units, "useful": self.useful / self.units, "lost": self.lost / self.units,
            "lost_by_cause": {k: v / self.units for k, v in self.lost_by_cause.items()},
            "money": None,
        }
        if self.money is not None and self.price is not None:
            lost = {k: self.money[k] for k, _ in CAUSES}
            per = self.money_units
            out["money"] = {**self.price.to_dict(), "currency": "USD", "spent": self.money["spent"] / per,
                            "useful": self.money["useful"] / per, "lost": sum(lost.values()) / per,
                            "lost_by_cause": {k: v / per for k, v in lost.items()}}
        return out


def split(holding: Holding, wall_s: float, useful_s: float, lost_s: Mapping[str, float],
          price: Price | None = None, billed: str = BILLED) -> ChipHours:
    """Chip-hours of `wall_s` held, of which `useful_s` productive and `lost_s` (seconds by cause, a key of
    CAUSES; `other` is what the rest leaves, so a given `other` is not read). A named cause that overlaps
    another can leave `other` negative: the figures still add up, and the text says so."""

    keys = [key for key, _ in CAUSES]
    seconds = [useful_s, *(lost_s.get(key, 0.0) for key in keys[:-1])]
    seconds.append(wall_s - sum(seconds))  # other: what the named causes leave
    hours = [holding.chips * s / 3600.0 for s in seconds]
    spent_h = holding.chips * wall_s / 3600.0
    units = _units_for(spent_h, hours)
    # Whole units that sum to the rounded total exactly: rounding lands where it is largest, never in a
    # made-up negative `other`.
    spent = round(spent_h * units)
    useful, *lost_units = apportion(spent, [h * units for h in hours])
    lost = dict(zip(keys, lost_units, strict=True))
    if price is None:
        return ChipHours(holding, wall_s, units, spent, useful, lost, billed=billed)
    usd = [v / units * price.usd_per_chip_hour for v in (useful, *lost_units)]
    money_units = _units_for(spent / units * price.usd_per_chip_hour, usd)
    total = round(spent / units * price.usd_per_chip_hour * money_units)
    useful_usd, *lost_usd = apportion(total, [v * money_units for v in usd])
    money = {"spent": total, "useful": useful_usd, **dict(zip(keys, lost_usd, strict=True))}
    return ChipHours(holding, wall_s, units, spent, useful, lost, price, money, money_units, billed)


def _units_for(total: float, parts: list[float]) -> int:
    """The finest power of two, UNITS at most, at which the total and every partial sum of the parts stay
    whole numbers a float holds exactly."""
    bound = abs(total) + sum(abs(p) for p in parts) + 1.0
    return 2 ** max(0, min(20, math.floor(math.log2(_EXACT / bound))))


def apportion(total: int, values: list[float]) -> list[int]:
    """Whole numbers, one per value, that sum to `total`, each the value's floor or ceiling where the values
    sum to it (largest remainder first)."""
    floors = [math.floor(v) for v in values]
    rest = total - sum(floors)
    order = sorted(range(len(values)), key=lambda i: (floors[i] - values[i], i))  # largest remainder first
    step = 1 if rest >= 0 else -1
    i = 0
    while rest != 0 and values:
        floors[order[i % len(order)] if step > 0 else order[-1 - i % len(order)]] += step
        rest -= step
        i += 1
    return floors


def decimals_for(value: float) -> int:
    """Decimals that show about four significant digits of `value` (2 to 8)."""
    if value <= 0:
        return 2
    return min(8, max(2, 3 - math.floor(math.log10(value))))


def _sum_line(values: Mapping[str, int], spent: int, useful: int, units: int) -> tuple[str, str, str, list[str]]:
    """(spent, useful, lost, causes) as text to the same decimals, rounded so that what is shown adds up:
    useful + lost = spent and the causes sum to lost, to the last digit."""
    d = decimals_for(abs(spent) / units)
    scale = 10**d / units
    spent_w = round(spent * scale)
    useful_w, lost_w = apportion(spent_w, [useful * scale, (spent - useful) * scale])
    causes = apportion(lost_w, [values[k] * scale for k, _ in CAUSES])

    def text(whole: int) -> str:
        # Integer arithmetic: a float quotient past 2**53 (a long run of many chips) drops the last digits.
        units_part, fraction = divmod(abs(whole), 10**d)
        return f"{'-' if whole < 0 else ''}{units_part:,}.{fraction:0{d}d}"

    return text(spent_w), text(useful_w), text(lost_w), [text(w) for w in causes]


def render(ch: ChipHours) -> list[str]:
    """The text lines: spent = useful + lost, the lost by cause, money when priced, what is billed."""
    word = ch.holding.hours_word
    spent, useful, lost, causes = _sum_line(ch.lost_by_cause, ch.spent, ch.useful, ch.units)
    lines = [f"{word}: {spent} spent = {useful} useful + {lost} lost ({ch.holding.what}, {_duration(ch.wall_s)} "
             "wall)",
             "  lost: " + ", ".join(f"{words} {p}" for (_, words), p in zip(CAUSES, causes, strict=True))]
    if ch.holding.hint:
        lines.append(f"  ({ch.holding.hint})")
    if ch.lost_by_cause["other"] < 0:
        lines.append("  (other is negative: the named causes overlap, e.g. a failure during a recovery; the figures "
                     "still add up)")
    if ch.money is not None and ch.price is not None:
        m = ch.money
        spent, useful, lost, causes = _sum_line(m, m["spent"], m["useful"], ch.money_units)
        lines.append(f"money at ${ch.price.usd_per_chip_hour:g}/{ch.holding.unit}-hour: {_usd(spent)} spent = "
                     f"{_usd(useful)} useful + {_usd(lost)} lost")
        lines.append("  lost: " + ", ".join(f"{words} {_usd(p)}" for (_, words), p in
                                            zip(CAUSES, causes, strict=True)))
        lines.append(f"  price: {ch.price.source}")
    lines.append(f"  billed: {ch.billed}")
    return lines


def _usd(text: str) -> str:
    return f"-${text[1:]}" if text.startswith("-") else f"${text}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"

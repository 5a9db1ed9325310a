"""The drain: whether a stop on SIGTERM saves on the way out, and what the stop cost.

Why: a save that the kubelet's SIGKILL cuts short is worse than none. Under multi-controller every process
takes part in the save of a sharded state, so a save begun too late also holds the whole group until the
grace period ends, and the restart rewinds to the newest committed checkpoint anyway. So the process that
heard the signal decides once, when it announces the group's stop (trainer.elastic.group_stop), and every
process follows that one decision: a save that only some processes begin never commits.

The rule: save when the grace period left at the stop step covers the save with room to spare,

    grace - (seconds since the signal) - (one step, the last one before the stop) >= 1.5 x save + 3 s

(the 1.5 x is the launcher's own margin on --checkpoint-save-time, docs/launcher.md; the 3 s cover the
records, the progress write and jax.distributed's shutdown after the commit). `save` is the slowest save
this process has committed so far, from save() to its commit (it measured this storage and this state),
else an estimate from the bytes this process holds: SAVE_FIXED_S + bytes / SAVE_BYTES_PER_S, twice as
slow as one blocking save of each preset's state measured on CPU to a local disk (tools/drain_save_cost.py;
docs/trainer.md gives the figures).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SAFETY = 1.5
EXIT_RESERVE_S = 3.0
SAVE_FIXED_S = 0.2  # measured 0.09 s (micro, 5 MB) on CPU to a local disk
SAVE_BYTES_PER_S = 4e8  # measured 0.7-0.8 GB/s (125m's 1.3 GB, 350m's 4.1 GB) on CPU to a local disk


@dataclass(frozen=True)
class SaveVerdict:
    save: bool
    why: str  # what the decision rested on, one clause: said in the record where it does not save


def expected_save_s(observed_s: list[float], state: Any) -> float:
    """The slowest save this process has committed, else the estimate from the bytes it holds of `state`."""
    if observed_s:
        return max(observed_s)
    return SAVE_FIXED_S + local_bytes(state) / SAVE_BYTES_PER_S


def local_bytes(state: Any) -> int:
    """The bytes of `state` on this process's devices: what its part of a sharded save writes."""
    import jax

    total = 0
    for leaf in jax.tree.leaves(state):
        shards = getattr(leaf, "addressable_shards", None)
        total += sum(s.data.nbytes for s in shards) if shards is not None else int(getattr(leaf, "nbytes", 0))
    return total


def verdict(grace_s: float, heard_ago_s: float, step_s: float, save_s: float) -> SaveVerdict:
    """Whether the grace period left at the stop step (one step of `step_s` from now) covers a save of
    `save_s` seconds, by the rule in this module's docstring."""
    left = grace_s - heard_ago_s - step_s
    needed = SAFETY * save_s + EXIT_RESERVE_S
    clause = (f"{left:.1f} s of the {grace_s:g} s grace period left at the stop step, a save needs "
              f"{needed:.1f} s ({SAFETY:g} x {save_s:.1f} s + {EXIT_RESERVE_S:g} s)")
    return SaveVerdict(left >= needed, clause)


@dataclass(frozen=True)
class DrainOutcome:
    """What a stop on SIGTERM left behind, for the records: saved the stop step or not, the steps its
    restart rewinds (0 when saved), and why it did not save ("" when it did)."""

    saved: bool
    steps_lost: int
    save_skipped: str = ""


def outcome(stop_step: int, committed: int | None, saved: bool, save_skipped: str) -> DrainOutcome:
    """The steps a restart after a stop at `stop_step` rewinds: back to the newest committed checkpoint."""
    return DrainOutcome(saved, stop_step - (committed or 0), "" if saved else save_skipped)

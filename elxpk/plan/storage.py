"""What checkpoints cost in the bucket: how many are kept, GiB, money per month, bytes written per day.

Two retention rules can apply at once: the checkpoint manager keeps the newest `max_to_keep` steps
(0 = keep all), and a bucket lifecycle rule deletes objects older than `ttl`. The count is the peak,
just after a save.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = float(2**30)
DAY_S = 86400.0


@dataclass(frozen=True)
class Storage:
    checkpoints_kept: int
    gib_kept: float
    monthly_cost: float
    written_gib_per_day: float
    # A lifecycle rule shorter than one save interval can delete the only (newest) checkpoint.
    ttl_can_delete_newest: bool


def storage(
    *,
    size_bytes: float,
    save_interval_s: float,
    max_to_keep: int,
    ttl_s: float | None,
    price_per_gib_month: float,
) -> Storage:
    """Retention under `max_to_keep` and `ttl` for saves every `save_interval_s` of wall time."""
    by_ttl = math.inf if ttl_s is None else max(1, math.ceil(ttl_s / save_interval_s))
    by_count = math.inf if max_to_keep == 0 else max_to_keep
    kept = min(by_ttl, by_count)
    if math.isinf(kept):
        raise ValueError("max_to_keep 0 (keep all) without a ttl keeps an unbounded number of checkpoints")
    kept = int(kept)
    gib = kept * size_bytes / GIB
    return Storage(
        checkpoints_kept=kept,
        gib_kept=gib,
        monthly_cost=gib * price_per_gib_month,
        written_gib_per_day=size_bytes / GIB * DAY_S / save_interval_s,
        ttl_can_delete_newest=ttl_s is not None and ttl_s < save_interval_s,
    )

"""What a job's chips are and what a chip-hour costs: the accelerator type -> chips per slice, the
`--accelerator` and `--chip-hour-price` flag rows that `report`, `workload status` and `plan` share, and a
small table of cited list prices.

Chips come from the accelerator catalog (elxpk/catalog.py): a TPU type's chips per VM x VMs per slice, or a
GPU device type's GPUs per node (a GPU "slice" is one node group, so its chips are GPUs per node x nodes).
Ground of the stages (standard library and the catalog only).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from elxpk import catalog
from elxpk.errors import UsageError
from elxpk.flag_rows import FLOAT, TEXT, Flag


class Accelerator(NamedTuple):
    """One slice's chips: `name` as the user spells it, `unit` the billed chip ("chip" on TPUs, "GPU")."""

    name: str
    chips_per_slice: int
    unit: str
    family: str  # the key of PRICES: v5p, v5litepod, v6e, ... or a GPU device type


class ListPrice(NamedTuple):
    usd_per_chip_hour: float
    what: str  # which price it is (on-demand, evaluation, region)
    source: str  # the page it was read from
    date: str  # the page's date, or the day it was read when the page shows none


# List prices per chip-hour, each with the page it was read from and that page's date (also in
# docs/local.md). Only prices a page states are here; a region, a commitment or a discount changes
# them: --chip-hour-price overrides. The GPU types and v4/tpu7x have no cited figure, so no entry.
PRICES: dict[str, ListPrice] = {
    "v5litepod": ListPrice(1.20, "TPU v5e on-demand list price",
                           "https://artificial-intelligence-wiki.com/ai-development/ai-hardware-infrastructure/"
                           "tpu-v5-guide", "2026-01-27"),
    "v5p": ListPrice(4.20, "TPU v5p on-demand list price",
                     "https://artificial-intelligence-wiki.com/ai-development/ai-hardware-infrastructure/"
                     "tpu-v5-guide", "2026-01-27"),
    "v6e": ListPrice(2.70, "TPU v6e (Trillium) price at general availability, 'starting at', evaluation",
                     "https://neowin.net/amp/google-takes-on-nvidia-blackwell-gpus-with-the-new-trillium-tpus",
                     "page undated, read 2026-12-03 (it reports the GA of 2024-12)"),
}

_COMMANDS_WITH_TYPE = ("report", "plan")  # `workload status` reads the type from the workload itself
_COMMANDS_WITH_PRICE = ("report", "status", "plan")
_TYPE_EXAMPLE = "a TPU type such as v5p-16 or v5litepod-2x4, or a GPU device type such as h100-80gb-8"

FLAGS: tuple[Flag, ...] = (
    Flag("accelerator", TEXT, "The job's accelerator type, for chip-hours: a TPU type (v5p-16, v6e-2x4) or a "
         "GPU device type (h100-80gb-8, one node per slice); chips = its chips per slice x slices.",
         metavar="TYPE", commands=_COMMANDS_WITH_TYPE,
         doc="the accelerator type (a TPU type or a GPU device type, one node per slice): chips per slice "
         "x slices gives chip-hours and, with a price, money",
         doc_default="none: device-hours of the run's devices (`report`), no chip figures (`plan`)"),
    Flag("chip_hour_price", FLOAT, "USD per chip-hour (a GPU-hour on GPUs), to state badput in money.",
         metavar="USD", low=0, commands=_COMMANDS_WITH_PRICE, fix="dollars per chip-hour, e.g. 4.2",
         doc="dollars per chip-hour: badput and spend in money; without it, the cited list price of the "
         "accelerator's family where elxpk has one",
         doc_default="the family's list price (v5e 1.20, v5p 4.20, v6e 2.70), else no money"),
)
BY_NAME: dict[str, Flag] = {f.name: f for f in FLAGS}


def lookup(name: str, nodes_per_slice: int = 1) -> Accelerator:
    """The accelerator `name` spells: a TPU type from the catalog, else a GPU device type (or its machine
    type). ValueError with the fix when it is neither."""
    try:
        row = catalog.find(name.strip().lower())
    except catalog.UnknownTpuType as exc:
        raise ValueError(f"{exc}; give {_TYPE_EXAMPLE}") from None
    return _of(row, nodes_per_slice)


def _of(row: catalog.TpuType | catalog.GpuType, nodes_per_slice: int) -> Accelerator:
    if isinstance(row, catalog.GpuType):
        return Accelerator(row.name, row.gpus_per_node * nodes_per_slice, "GPU", row.name)
    # the catalog's own name (v4-8, never v4-2x2x1 for the same slice): status, report and alerts name it alike
    return Accelerator(row.name, row.chips_per_slice, "chip", row.name.rsplit("-", 1)[0])


def from_node_labels(tpu_accelerator: str | None, topology: str | None, gpu_accelerator: str | None,
                     nodes_per_slice: int) -> Accelerator | None:
    """The accelerator a workload's node selector asks for (GKE's labels), or None when it names none that
    the catalogs know."""
    row = catalog.from_node_labels(tpu_accelerator, topology, gpu_accelerator)
    return None if row is None else _of(row, nodes_per_slice)


def read_accelerator(raw: str | None) -> tuple[Accelerator | None, str | None]:
    """`--accelerator` checked: (the accelerator or None, one line naming the flag when it is refused)."""
    if raw is None:
        return None, None
    try:
        return lookup(raw), None
    except ValueError as exc:
        return None, f"--accelerator {raw!r}: {exc}"


def read_price(raw: str | float | None) -> tuple[float | None, str | None]:
    """`--chip-hour-price` checked with its row: a finite number, 0 or more."""
    if raw is None:
        return None, None
    value, problem = BY_NAME["chip_hour_price"].read(raw)
    return (None, problem) if problem else (value, None)


def checked_price(raw: str | float | None) -> float | None:
    """`--chip-hour-price` alone (a command without --accelerator): the price, or UsageError (exit 2)."""
    value, problem = read_price(raw)
    if problem:
        raise UsageError(problem)
    return value


def read_flags(given: Mapping[str, Any]) -> tuple[Accelerator | None, float | None, list[str]]:
    """`--accelerator` and `--chip-hour-price` as a command received them (absent keys: not given): the
    accelerator, the price, and one line per refused value, each naming its flag. A price needs chips: a
    command that takes --accelerator refuses a price without it."""
    accelerator, bad_type = read_accelerator(given.get("accelerator"))
    price, bad_price = read_price(given.get("chip_hour_price"))
    problems = [p for p in (bad_type, bad_price) if p]
    if price is not None and "accelerator" in given and given["accelerator"] is None:
        problems.append("--chip-hour-price: a price per chip-hour needs the chips; give --accelerator TYPE too "
                        "(e.g. --accelerator v5p-16)")
    return accelerator, price, problems


class Price(NamedTuple):
    usd_per_chip_hour: float
    source: str  # "--chip-hour-price", or the table's what, page and date

    def to_dict(self) -> dict:
        return {"usd_per_chip_hour": self.usd_per_chip_hour, "source": self.source}


def price_of(accelerator: Accelerator | None, given: float | None) -> Price | None:
    """The price to use: the flag's, else the family's cited list price, else None (no money)."""
    if given is not None:
        return Price(given, "--chip-hour-price")
    listed = PRICES.get(accelerator.family) if accelerator is not None else None
    if listed is None:
        return None
    return Price(listed.usd_per_chip_hour, f"{listed.what}, {listed.source} ({listed.date}); "
                 "--chip-hour-price overrides")

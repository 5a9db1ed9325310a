"""One reason the API server, the JobSet webhook or the Job API would refuse an object."""

from __future__ import annotations

from typing import Any, NamedTuple

from elxpk.units import INT32, INT64


class Violation(NamedTuple):
    path: str  # the field path, as the API server prints it: spec.replicatedJobs[0].template.spec.completions
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def join(path: str, child: str | int) -> str:
    """`field.Path.Child` / `.Index`: `spec` + `replicatedJobs` -> `spec.replicatedJobs`, + 0 -> `...[0]`."""
    if isinstance(child, int):
        return f"{path}[{child}]"
    return f"{path}.{child}" if path else child


def int32_message(value: int) -> str:
    return f"{value} does not fit in int32 (format: int32): must be from {INT32[0]} to {INT32[1]}"


def int64_message(value: int) -> str:
    return f"{value} does not fit in int64 (format: int64): must be from {INT64[0]} to {INT64[1]}"


# format -> (lowest, highest, message): the integer formats the CRD schemas use.
INT_RANGES = {"int32": (*INT32, int32_message), "int64": (*INT64, int64_message)}


# A user's YAML can hold any shape where an object is expected: the rules read fields through these, so a
# wrong shape is a schema violation (reported by the schema check), never a crash in a rule.
def as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

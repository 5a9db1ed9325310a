"""The one field checker of the contract's records, driven by their dataclasses' annotations.

`parse_fields(cls, data)` checks a decoded JSON object field by field against `cls`'s annotations (bool,
int within MAX_INDEX, finite float, str, tuples, dicts, optionals) and builds the record, or raises
`RecordError` (one line naming the field); `to_json(record)` is the dict written. Every record kind
(records.py, event_records.py, progress_record.py) reads and writes through these two. Standard library only.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable
from typing import Any

from elxpk_contract.limits import MAX_INDEX


class RecordError(ValueError):
    """A decoded record does not have the declared shape; the message names the field."""


_HINTS: dict[type, dict[str, Any]] = {}
# Per class, its fields as (name, required, checker): built once from the annotations, so a run of millions
# of records is not checked by re-reading the annotations at every field (typing.get_origin per value).
_FIELDS: dict[type, list[tuple[str, bool, Callable[[str, object], Any]]]] = {}
_CHECKERS: dict[Any, Callable[[str, object], Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _fields(cls: type) -> list[tuple[str, bool, Callable[[str, object], Any]]]:
    if cls not in _FIELDS:
        hints = _hints(cls)
        _FIELDS[cls] = [(f.name, f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                         _checker(hints[f.name])) for f in dataclasses.fields(cls)]
    return _FIELDS[cls]


def parse_fields(cls: type, data: object):
    if not isinstance(data, dict):
        raise RecordError(f"expected a JSON object, got {type(data).__name__}")
    values = {}
    for name, required, check in _fields(cls):
        if name not in data:
            if required:
                raise RecordError(f"{name}: missing")
            continue
        values[name] = check(name, data[name])
    return cls(**values)


def _checker(hint: Any) -> Callable[[str, object], Any]:
    """The check of a value against the annotation `hint` (the value as the record holds it, or a
    RecordError naming the field), built once per annotation."""
    if hint in _CHECKERS:
        return _CHECKERS[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    check: Callable[[str, object], Any]
    if origin in (typing.Union, types.UnionType):
        optional = type(None) in args
        (inner,) = [a for a in args if a is not type(None)]
        inner_check = _checker(inner)

        def check(name: str, value: object) -> Any:
            if value is None and optional:
                return None
            return inner_check(name, value)
    elif origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _checker(args[0])

            def check(name: str, value: object) -> Any:
                if not isinstance(value, list):
                    raise RecordError(f"{name}: expected a list, got {value!r:.40}")
                return tuple(item(name, v) for v in value)
        else:
            items = [_checker(a) for a in args]

            def check(name: str, value: object) -> Any:
                if not isinstance(value, list):
                    raise RecordError(f"{name}: expected a list, got {value!r:.40}")
                if len(value) != len(items):
                    raise RecordError(f"{name}: expected {len(items)} values, got {value!r:.40}")
                return tuple(c(name, v) for c, v in zip(items, value, strict=True))
    elif origin is dict:
        def check(name: str, value: object) -> Any:
            if not isinstance(value, dict):
                raise RecordError(f"{name}: expected an object, got {value!r:.40}")
            return value
    else:
        check = _SCALARS.get(hint, _any)
    _CHECKERS[hint] = check
    return check


def _bool(name: str, value: object) -> Any:
    if not isinstance(value, bool):
        raise RecordError(f"{name}: expected true or false, got {value!r:.40}")
    return value


def _int(name: str, value: object) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"{name}: expected a whole number, got {value!r:.40}")
    if abs(value) > MAX_INDEX:
        raise RecordError(f"{name}: {value} is out of range (at most {MAX_INDEX})")
    return value


def _float(name: str, value: object) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RecordError(f"{name}: expected a finite number, got {value!r:.40}")
    return float(value)


def _str(name: str, value: object) -> Any:
    if not isinstance(value, str):
        raise RecordError(f"{name}: expected a string, got {value!r:.40}")
    return value


def _any(name: str, value: object) -> Any:
    return value


_SCALARS: dict[Any, Callable[[str, object], Any]] = {bool: _bool, int: _int, float: _float, str: _str}


def to_json(record: object) -> dict:
    out = {}
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out

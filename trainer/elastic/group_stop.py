"""A multi-controller group stops together: the SIGTERM that one process hears stops every process at one step.

Why: the pods of a deleted JobSet get SIGTERM one Job at a time, and an evicted slice's pods are the only
ones signalled. A process that stopped alone at a step boundary left its peers inside that step's
collective, waiting for it; it then waited at jax.distributed's shutdown barrier for them, and the group
sat there until the kubelet's SIGKILL a grace period later, with no exit code and no record.

How: the process that hears the signal announces a stop step in the coordination service's key-value
store (the first announcement wins), and every process reads the key at every step boundary. The step
announced is the announcer's next boundary, `s + 1` when it hears at boundary `s`. Every step is synced
(trainer.elastic.attempt reads the loss), and a step ends only once every process has begun it. So when
the announcer writes at boundary `s`, every peer has passed boundary `s - 1` and none has passed `s + 1`:
each reads the key again at `s` or `s + 1`, and all stop at `s + 1` with step `s` done. The cost is one
small request to the coordinator per step, in groups of more than one process only.

The announcement also carries the announcer's decision whether the group saves the stop step on the way
out (trainer.elastic.drain): every process of a multi-controller group takes part in that save, so all of
them follow the one process that knows how much of its grace period is left.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

KEY = "elxpk_group_stop"  # the coordination service's key-value store


class GroupStop(NamedTuple):
    step: int  # the step boundary at which every process stops
    process: int  # the process that heard the signal
    slice: int | None  # its slice (None where the backend has no per-process slice)
    signal: str  # what it heard, e.g. SIGTERM
    save: bool = True  # whether the group saves the stop step on the way out (the announcer's decision)

    def text(self) -> str:
        return (f"{self.step} {self.process} {'-' if self.slice is None else self.slice} {self.signal} "
                f"{'save' if self.save else 'nosave'}")

    @classmethod
    def parse(cls, text: str) -> GroupStop | None:
        """None for anything but what `text` writes (the key is this module's alone; a bad value is no stop)."""
        found = _TEXT.fullmatch(text)
        if found is None:
            return None
        step, process, slice_index, signal, save = found.groups()
        return cls(int(step), int(process), None if slice_index == "-" else int(slice_index), signal, save == "save")


_NUMBER = "0|[1-9][0-9]{0,17}"  # no sign, no leading zero, no non-ASCII digit: what text() writes, only
_TEXT = re.compile(f"({_NUMBER}) ({_NUMBER}) (-|{_NUMBER}) ([A-Z][A-Z0-9]{{0,15}}) (save|nosave)")


class GroupStopBoard:
    """One process's view of the group's stop, read through jax.distributed's coordination client."""

    def __init__(self, client: Any, process: int, slice_index: int | None) -> None:
        self._client, self._process, self._slice = client, process, slice_index
        self._announced = False
        self._agreed: GroupStop | None = None

    def at_boundary(self, step: int, heard: str | None, save: bool) -> GroupStop | None:
        """The group's stop if it falls at `step` or before; announces this process's signal (and whether to
        save, `save`) once."""
        if heard is not None and not self._announced:
            self._announced = True
            self._announce(GroupStop(step + 1, self._process, self._slice, heard, save))
        if self._agreed is None:
            self._agreed = self._read()
        if self._agreed is not None and step >= self._agreed.step:
            return self._agreed
        return None

    def _announce(self, stop: GroupStop) -> None:
        import jax

        try:
            self._client.key_value_set(KEY, stop.text(), allow_overwrite=False)
        except jax.errors.JaxRuntimeError:
            pass  # ALREADY_EXISTS: a peer announced first, and its stop step holds (read next)

    def _read(self) -> GroupStop | None:
        import jax

        try:
            text = self._client.key_value_try_get(KEY)
        except jax.errors.JaxRuntimeError:
            # NOT_FOUND (nobody stopped), or the coordinator is gone: a dead peer shows in the step itself.
            return None
        return GroupStop.parse(text)

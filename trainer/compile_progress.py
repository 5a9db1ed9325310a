"""What `python -m trainer --compile-only` says while it compiles, on stderr (stdout is its JSON report): a first
line naming what is compiled, on what, and about how long it takes, then a sign of life every SIGN_OF_LIFE_S
seconds until the compile ends, whether stderr is a terminal or a pipe. `workload create --check-fit`
(elxpk/create/fit_check.py) relays these lines as they come, so a compile of minutes is never silent.

The time is a rough bucket, not a promise: XLA's compile for a TPU slice grows with the layers and with the
tokens each device holds, and a model of a billion parameters or more takes the issue's 5 to 15 minutes. Measured on a 2-core machine at a load of about 7 (compile_s of the report): the
tiny preset at 2 examples a device on 3 x v5e:4x4, 7 s; at 24 a device on 1 x v5e:2x2, 40 s; 125m at 24 a
device (2048 tokens each) on 1 x v5e:2x2, 310 s; issue 50 measured 5 to 15 minutes for 1b to 7b.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

PREFIX = "compile-only: "  # every line of this module starts so; the launcher relays exactly these
SIGN_OF_LIFE_S = 20.0


def about(n_layers: int, tokens_per_device: int, compiles: int, params: int) -> str:
    """How long the compile(s) take here, in words: a bucket of layers x tokens a device, and of the model's
    size from a billion parameters up (see the docstring)."""
    work = n_layers * tokens_per_device * compiles
    if params >= 10**9:
        return "5 to 15 minutes or more"
    if work <= 4096:
        return "well under a minute"
    if work <= 65536:
        return "about a minute"
    if work <= 1_000_000:
        return "a few minutes"
    return "5 to 15 minutes or more"


def first_line(what: str, where: str, n_layers: int, tokens_per_device: int, compiles: int, params: int) -> str:
    """What is compiled, on what, and about how long it takes (without PREFIX: `say` adds it)."""
    twice = " (twice: also on the fewest slices a resize reaches)" if compiles > 1 else ""
    return (f"compiling the train step of {what} for {where} on this machine's CPU, no chip needed"
            f"{twice}: {about(n_layers, tokens_per_device, compiles, params)} on 2 cores (more on a busy machine); a line "
            f"every {SIGN_OF_LIFE_S:g} s until it is done")


class SignOfLife:
    """A line every `period_s` seconds while the block runs (`with SignOfLife(...)`), from a daemon thread;
    `clock` and `wait` (an Event's wait: True when stopped) are injected in tests, which call `beat_until_stopped`."""

    def __init__(self, what: str, *, period_s: float = SIGN_OF_LIFE_S, out: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic, wait: Callable[[float], bool] | None = None) -> None:
        self._what = what
        self._period_s = period_s
        self._out = out
        self._clock = clock
        self._stopped = threading.Event()
        self._wait = wait or self._stopped.wait
        self._thread: threading.Thread | None = None

    def beat_until_stopped(self) -> None:
        began = self._clock()
        while not self._wait(self._period_s):
            elapsed = self._clock() - began
            say(f"still compiling {self._what}: {_duration(elapsed)} so far", self._out)

    def __enter__(self) -> SignOfLife:
        self._thread = threading.Thread(target=self.beat_until_stopped, name="compile-sign-of-life", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)


def say(text: str, out: TextIO | None = None) -> None:
    stream = out or sys.stderr
    try:
        print(PREFIX + text, file=stream, flush=True)
    except (OSError, ValueError):  # a closed stderr: the compile goes on, silent
        pass


def _duration(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"

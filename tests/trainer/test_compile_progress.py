"""The fit check is never silent (issue 50): `--compile-only`'s sign of life comes every SIGN_OF_LIFE_S seconds
by its clock (injected here), and `--check-fit` relays the trainer's progress lines as they come from a real
subprocess, keeping bounded what it reads. The lines of a real compile: tests/trainer/test_compile_only.py."""

from __future__ import annotations

import io
import sys

from elxpk.create import compile_relay
from trainer import compile_progress
from trainer.compile_progress import SignOfLife, about, first_line


def test_a_sign_of_life_every_period_by_the_injected_clock_until_stopped():
    now = [100.0]
    waits: list[float] = []

    def wait(seconds: float) -> bool:  # an Event's wait: True once stopped (after the fourth period here)
        waits.append(seconds)
        now[0] += seconds
        return len(waits) > 4

    out = io.StringIO()
    SignOfLife("for 3 x v5e:4x4 (48 devices)", out=out, clock=lambda: now[0], wait=wait).beat_until_stopped()
    assert waits == [20.0] * 5
    assert out.getvalue().splitlines() == [
        f"compile-only: still compiling for 3 x v5e:4x4 (48 devices): {t} so far"
        for t in ("20 s", "40 s", "1 min 00 s", "1 min 20 s")]


def test_the_thread_stops_when_the_compile_ends():
    out = io.StringIO()
    with SignOfLife("x", out=out, period_s=3600.0) as life:
        pass
    assert life._thread is not None and not life._thread.is_alive() and out.getvalue() == ""


def test_the_first_line_says_what_where_and_about_how_long():
    # The measured points of trainer/compile_progress.py's docstring, each in its bucket
    assert about(4, 128, 1, 3 * 10**6) == "well under a minute" and about(4, 1536, 1, 3 * 10**6) == "about a minute"
    assert about(12, 49152, 1, 110 * 10**6) == "a few minutes"
    assert about(16, 4096, 1, 1_200_000_000) == about(32, 4096 * 64, 2, 10**8) == "5 to 15 minutes or more"
    line = first_line("--model 1b (1.2B parameters)", "3 x v5e:4x4 (48 devices)", 16, 4096, 2, 1_200_000_000)
    assert line.startswith("compiling the train step of --model 1b (1.2B parameters) for 3 x v5e:4x4 (48 devices) "
                           "on this machine's CPU, no chip needed (twice: also on the fewest slices a resize reaches)")
    assert compile_progress.PREFIX == compile_relay.PREFIX  # the launcher relays exactly the trainer's lines


TRAINER_LIKE = r"""
import sys
print("compile-only: compiling the train step of x", file=sys.stderr, flush=True)
print("some jax warning", file=sys.stderr, flush=True)
print("compile-only: still compiling for y: 20 s so far", file=sys.stderr, flush=True)
sys.stderr.write("z" * 100000 + "\n")  # one huge line: read in pieces
for _ in range(300):
    print("noise", file=sys.stderr)
sys.stdout.write("x" * 3_000_000)  # past the bound: drained, not kept
print('\n{"bytes_per_device": 1}')
"""


def test_the_launcher_relays_the_trainer_s_progress_lines_and_keeps_its_streams_bounded():
    notes: list[str] = []
    code, out, err = compile_relay.run_relaying([sys.executable, "-c", TRAINER_LIKE], {}, notes.append, 120.0)
    assert code == 0
    assert notes == ["check-fit: compiling the train step of x", "check-fit: still compiling for y: 20 s so far"]
    assert len(out) == compile_relay.OUT_BYTES and len(err) == compile_relay.ERR_LINES
    assert all(len(line) <= compile_relay.LINE_CHARS for line in err) and err[-1] == "noise"


def test_a_compile_past_the_timeout_is_killed_and_said():
    code, _, _ = compile_relay.run_relaying([sys.executable, "-c", "import time; time.sleep(600)"], {},
                                            lambda line: None, 0.5)
    assert code is None

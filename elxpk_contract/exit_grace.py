"""Exit without waiting forever for threads that will never end. Standard library only: the trainer and
the `elxpk` console script both end through it.

orbax leaves non-daemon threads behind when a save fails before its background work began: a thread
waiting for the save's signals (for orbax's coordination timeout, minutes), or one that could not even
start ("can't start new thread" under a memory limit). The interpreter's own exit joins every non-daemon
thread, so the process went on after its error line was printed: a container that never ends, a
`elxpk local run` that a terminal or a CI step waits on. Whoever calls this has already waited for every
save that started, so nothing is lost by not waiting for the rest."""

from __future__ import annotations

import os
import sys
import threading
import time

EXIT_GRACE_S = 20.0
# After a failure the threads left are the failure's own (a save that never began waits for signals that
# will never come: seen under a memory limit, a thread that could not start): a short wait, so the exit
# code reaches the orchestrator in seconds, not after every failure's extra 20 s.
FAILED_EXIT_GRACE_S = 2.0


def grace_for(code: int) -> float:
    return EXIT_GRACE_S if code == 0 else FAILED_EXIT_GRACE_S


def exit_within_grace(code: int) -> None:
    """Exit with `code`, waiting at most grace_for(code) for the other non-daemon threads; when some are still
    running then, say so in one line and end the process without them (os._exit: no interpreter exit)."""
    leave_stuck_threads(code)
    sys.exit(code)


def leave_stuck_threads(code: int) -> None:
    """Return once the other non-daemon threads have ended, within grace_for(code); else end the process
    with `code` after one warning line, its streams flushed. Returns at once when there are none (the usual
    case)."""
    grace_s = grace_for(code)
    deadline = time.monotonic() + grace_s
    others = [t for t in threading.enumerate() if _waited_for(t)]
    for thread in others:
        try:
            thread.join(max(0.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001, S110 - orbax's own thread class raises TimeoutError from join(timeout)
            pass
    stuck = [t.name for t in others if t.is_alive()]
    if not stuck:
        return
    end_now(code, f"warning: {len(stuck)} background thread(s) ({', '.join(stuck[:3])}) still running "
                  f"{grace_s:g} s after the run ended; exiting {code} without them")


def end_now(code: int, line: str | None = None) -> None:
    """End the process with `code` at once, its streams flushed (and `line` written to stderr): no
    interpreter exit, so neither its joins nor its exit hooks run."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: the exit code still says it
            pass
    if line is not None:
        try:
            print(line, file=sys.stderr, flush=True)
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)


def _waited_for(thread: threading.Thread) -> bool:
    """A thread the interpreter's exit would join. An idle ThreadPoolExecutor worker is one, but it ends only
    when the interpreter's exit tells it to (concurrent.futures' own exit hook, which runs first): joining it
    here would wait out the whole grace on every exit, so it is left to that hook."""
    if thread is threading.current_thread() or thread.daemon:
        return False
    worker = getattr(sys.modules.get("concurrent.futures.thread"), "_worker", None)
    return worker is None or getattr(thread, "_target", None) is not worker

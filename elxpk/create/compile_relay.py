"""`--check-fit`'s subprocess, `python -m trainer --compile-only`, run with its progress relayed as it comes.

The trainer says on stderr what it compiles and about how long it takes, then gives a sign of life every 20 s
(trainer/compile_progress.py: lines that start `compile-only: `); each such line reaches `note` at once as
`check-fit: ...`, so a compile of minutes is never silent. What is kept of the streams is bounded: the last
ERR_LINES lines of stderr (each cut to LINE_CHARS) for the error line, and OUT_BYTES of stdout, where the
report is one JSON line of a few KiB.
"""

from __future__ import annotations

import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence

PREFIX = "compile-only: "  # trainer/compile_progress.py's; the launcher imports no trainer module
ERR_LINES = 200
LINE_CHARS = 2000
OUT_BYTES = 1 << 20


def run_relaying(argv: Sequence[str], env: Mapping[str, str], note: Callable[[str], None],
                 timeout_s: float) -> tuple[int | None, str, list[str]]:
    """(exit code, stdout, the last lines of stderr); the code is None when it ran past `timeout_s` (then killed)."""
    proc = subprocess.Popen(list(argv), env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    err: deque[str] = deque(maxlen=ERR_LINES)
    out: list[str] = []

    def relay() -> None:
        assert proc.stderr is not None
        # readline bounded: a line with no end is read in pieces, never whole into memory
        while raw := proc.stderr.readline(LINE_CHARS):
            line = raw.rstrip("\n")
            err.append(line)
            if line.startswith(PREFIX):
                note("check-fit: " + line[len(PREFIX):])

    def collect() -> None:
        assert proc.stdout is not None
        out.append(proc.stdout.read(OUT_BYTES))
        while proc.stdout.read(65536):  # past the bound: drained, not kept, so the trainer never blocks on a pipe
            pass

    readers = [threading.Thread(target=relay, daemon=True), threading.Thread(target=collect, daemon=True)]
    for reader in readers:
        reader.start()
    try:
        code: int | None = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for reader in readers:
        reader.join(timeout=10.0)
    return code, "".join(out), list(err)

"""A stack sampler for a benchmark's subprocesses: where a process's threads spend its start-up (issue 49).

Put this folder first on PYTHONPATH and set ELXPK_STACK_SAMPLES to a file path: every process started so
samples each thread's stack every ELXPK_STACK_SAMPLE_MS (100) milliseconds from the interpreter's start and
appends them as JSON lines at exit ({"t": seconds since the sampler started, "thread": name, "frames": the
innermost 12, "file:function:line"}). Only benchmarks use it; the trainer knows nothing of it. Without the
variable it does nothing.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time

_PATH = os.environ.get("ELXPK_STACK_SAMPLES")


def _frames(frame, depth: int = 12) -> list[str]:
    out = []
    while frame is not None and len(out) < depth:
        code = frame.f_code
        out.append(f"{'/'.join(code.co_filename.rsplit('/', 3)[-3:])}:{code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return out


def _start(path: str) -> None:
    every = float(os.environ.get("ELXPK_STACK_SAMPLE_MS", "100")) / 1000
    began = time.time()
    samples: list[dict] = []

    def sample() -> None:
        me = threading.get_ident()  # the sampler's own thread (_start runs on the main thread)
        while True:
            time.sleep(every)
            names = {t.ident: t.name for t in threading.enumerate()}
            now = round(time.time() - began, 3)
            for ident, frame in sys._current_frames().items():
                if ident != me:
                    samples.append({"t": now, "thread": names.get(ident, str(ident)), "frames": _frames(frame)})

    def dump() -> None:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"pid": os.getpid(), "argv": sys.argv[:6], "began": began}) + "\n")
            for s in list(samples):
                out.write(json.dumps(s) + "\n")

    threading.Thread(target=sample, name="stack-sampler", daemon=True).start()
    atexit.register(dump)


if _PATH:
    _start(_PATH)

"""`--profiler xplane`: a jax.profiler trace of a few steps, beside the run's records (MaxText's profiler).

The trace starts after `--skip-first-n-steps-for-profiler` steps of this process (0: before its first step;
the compile comes before that step either way) and stops after `--profiler-steps` more, or when the run
ends first. jax writes it as RUN_DIR/profile/plugins/profile/<time>/<host>.xplane.pb, which TensorBoard's
profile plugin and XProf read: `tensorboard --logdir RUN_DIR/profile`. Once per process, from the record
observer (trainer/metrics.py), so it sees exactly the steps the records hold: process 0's. A trace that
cannot start or be written is a warning; it never stops training.
"""

from __future__ import annotations

import sys
from typing import TextIO

PROFILE_DIR = "profile"  # under the run directory


def profile_dir(run_dir: str) -> str:
    """RUN_DIR/profile, joined as text so that a gs:// URL stays one."""
    return f"{run_dir.rstrip('/')}/{PROFILE_DIR}"


class ProfileCapture:
    def __init__(self, run_dir: str, skip: int, steps: int, run_steps: int, out: TextIO | None = None) -> None:
        self.dir = profile_dir(run_dir)
        self._skip, self._steps = skip, steps
        self._run_steps = run_steps  # --steps: no trace starts after the last step
        self._out = out
        self._seen = 0  # steps this process has run
        self._first: int | None = None  # the first step traced
        self._last: int | None = None
        self.state = "waiting"  # tracing, done

    def observe(self, kind: str, record: dict) -> None:
        if self.state == "done":
            return
        if kind == "event":
            # The first attempt's restore_done is written after its compile, just before its first step.
            if self._skip == 0 and self.state == "waiting" and record.get("event") == "restore_done":
                self._start()
            return
        if kind != "metric":
            return
        self._seen += 1
        if self.state == "tracing":
            step = int(record["step"])
            self._first = step if self._first is None else self._first
            self._last = step
            if self._seen >= self._skip + self._steps:
                self.close()
        elif self._seen == self._skip and int(record["step"]) + 1 < self._run_steps:
            self._start()

    def _start(self) -> None:
        import jax

        try:
            jax.profiler.start_trace(self.dir)
        except Exception as exc:  # noqa: BLE001 - a profile is never worth the run
            self.state = "done"
            self._warn(f"cannot start the trace in {self.dir}: {exc}")
            return
        self.state = "tracing"

    def close(self) -> None:
        """Stop a trace under way (the run ended within it) and say where it went."""
        if self.state != "tracing":
            if self.state == "waiting" and self._out is not None:
                print(f"profile: none: this process ran {self._seen} step(s), not more than "
                      f"--skip-first-n-steps-for-profiler {self._skip}", file=self._out, flush=True)
            self.state = "done"
            return
        self.state = "done"
        import jax

        try:
            jax.profiler.stop_trace()
        except Exception as exc:  # noqa: BLE001 - as above
            self._warn(f"cannot write the trace to {self.dir}: {exc}")
            return
        if self._out is None:
            return
        if self._first is None:  # the run stopped between the trace's start and its first step
            print(f"profile: none: the run stopped before a step was traced (a trace without steps is in "
                  f"{self.dir})", file=self._out, flush=True)
            return
        steps = f"step {self._first}" if self._first == self._last else f"steps {self._first}-{self._last}"
        print(f"profile: {steps} traced into {self.dir} (tensorboard --logdir {self.dir})", file=self._out,
              flush=True)

    def _warn(self, text: str) -> None:
        print(f"warning: --profiler xplane: {(text.splitlines() or [''])[0][:300]}", file=sys.stderr, flush=True)

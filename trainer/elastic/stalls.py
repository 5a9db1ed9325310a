"""What the trainer does when the stall watchdog fires (trainer/elastic/watchdog.py).

1. Every thread's stack goes to stderr (the container log) and to RUN_DIR/stalls/<utc time>-p<process>.txt,
   so the hang can be diagnosed after the pod is gone.
2. A `stall_detected` event records the step, the slices, the timeout and the file.
3. The stall is then a lost slice. Where the backend can unblock the hung step (the simulated backend's
   injected hang) and the elastic loop retries in process, the stalled slice is marked lost, the step
   raises a slice-down error and the loop recovers as from any slice loss. Otherwise (a real hang in a
   collective cannot be interrupted from Python) the process exits with STALLED (76), retryable: the
   group restart is the recovery.
4. A recovery that does not take hold (the hung step does not return within one more stall timeout after
   the interrupt: a thread stuck where Python cannot reach it) ends the process with 76 too (`stuck`),
   with the stacks of that moment and a second `stall_detected` event (action "exit").
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from elxpk_contract.exit_codes import STALLED
from trainer.elastic.watchdog import Stall, thread_stacks

if TYPE_CHECKING:
    from trainer.elastic.context import AttemptContext


class StallResponse:
    """The watchdog's `on_stall` for one run. `exit_process` is os._exit: the main thread is hung, so
    nothing short of ending the process returns control; tests of that path run a subprocess."""

    def __init__(self, ctx: AttemptContext, exit_process: Callable[[int], None] = os._exit) -> None:
        self._ctx = ctx
        self._exit = exit_process

    def __call__(self, stall: Stall) -> None:
        ctx = self._ctx
        backend, rec = ctx.backend, ctx.recorder
        stacks = thread_stacks()
        header = (f"stall: no step completed for {stall.since_s:.1f}s (stall timeout {stall.timeout_s:g}s) at step "
                  f"{stall.step}; every thread's stack follows")
        print(f"{header}\n{stacks}", file=sys.stderr, flush=True)
        relative = self._write_stacks(header, stacks, stall)
        stalled = backend.stalled_slices()
        recover = ctx.policy.retries and backend.can_interrupt_stall()
        rec.event("stall_detected", stall.step, slices=stalled, timeout_s=round(stall.timeout_s, 6),
                  since_s=round(stall.since_s, 6), stacks=relative, action="recover" if recover else "exit")
        if recover:
            ctx.stalled = True  # the slice-down error the interrupt raises is this stall: its class is STALLED
            backend.interrupt_stall(f"no step completed for {stall.since_s:.1f}s (stall timeout "
                                    f"{stall.timeout_s:g}s)")
            return
        self._end(f"no step completed for {stall.since_s:.1f}s at step {stall.step} (stall timeout "
                  f"{stall.timeout_s:g}s)", relative)

    def stuck(self, stall: Stall, waited_s: float) -> None:
        """The watchdog's `on_stuck`: the in-process recovery of `stall` did not take hold."""
        stacks = thread_stacks()
        header = (f"stall: the recovery from the stall at step {stall.step} did not take hold within "
                  f"{waited_s:.1f}s (the hung step did not return); every thread's stack follows")
        print(f"{header}\n{stacks}", file=sys.stderr, flush=True)
        relative = self._write_stacks(header, stacks, stall)
        self._ctx.recorder.event("stall_detected", stall.step, slices=list(stall.active),
                                 timeout_s=round(stall.timeout_s, 6), since_s=round(stall.since_s + waited_s, 6),
                                 stacks=relative, action="exit")
        self._end(f"at step {stall.step} the step stayed hung {waited_s:.1f}s after the recovery interrupted it "
                  f"(stall timeout {stall.timeout_s:g}s)", relative)

    def _end(self, what: str, relative: str) -> None:
        if self._ctx.progress is not None:
            self._ctx.progress.finish("stalled", exit_code=STALLED.code)
        self._ctx.recorder.flush()  # os._exit skips close: records held for an object store go up first
        print(f"error: stalled: {what}; stacks in {relative or 'the log above'}; exit {STALLED.code} (retryable)",
              file=sys.stderr, flush=True)
        sys.stdout.flush()
        self._exit(STALLED.code)

    def _write_stacks(self, header: str, stacks: str, stall: Stall) -> str:
        """The stack file, relative to the run directory ('' when it cannot be written)."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self._ctx.clock.time()))
        relative = f"stalls/{stamp}-step{stall.step}-p{self._ctx.backend.process_index}.txt"
        from etils import epath  # lazy: as orbax does, a gs:// run dir gets its stacks there (gcsfs)

        if (epath.Path(self._ctx.cfg.run_dir) / relative).exists():  # the stuck recovery's, beside the stall's
            relative = relative.replace(".txt", "-stuck.txt")
        path = epath.Path(self._ctx.cfg.run_dir) / relative
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{header}\n\n{stacks}", encoding="utf-8")
        except OSError as exc:
            print(f"warning: cannot write {path}: {exc}", file=sys.stderr, flush=True)
            return ""
        return relative

"""The stall watchdog never counts a compile: nothing compiles on the training thread while it is armed.

jax reports every backend compile through `jax.monitoring`; the run's observer sees `restore_done` (written
right before the watchdog is armed) and every later record on the same thread. A compile on the training
thread between `restore_done` and the end of the attempt would be a compile inside the armed step loop:
the first save's fingerprint was one, and with a short stall timeout it made the run exit 76 (issue 21).
Not timed: the test counts compiles, whatever the machine's load.
"""

from __future__ import annotations

import threading

import jax.monitoring
import pytest

from tests.support.runs import tiny_config

_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


class _ArmedCompiles:
    def __init__(self) -> None:
        self.armed = False
        self.during: list[str] = []
        self.total = 0
        self._main = threading.current_thread()

    def on_duration(self, event: str, duration: float, **_kw) -> None:
        # The training thread, and the one that makes its step beside the restore (trainer/elastic/step_ahead.py,
        # joined before the watchdog is armed); the live checks compile in a thread of their own, beside the steps.
        thread = threading.current_thread()
        if event == _COMPILE_EVENT and (thread is self._main or thread.name == "elxpk-step-ahead"):
            self.total += 1
            if self.armed:
                self.during.append(f"compile of {duration:.3f}s on {thread.name} while armed")

    def observe(self, kind: str, record: dict) -> None:
        if kind == "event" and record["event"] == "restore_done":
            self.armed = True
        elif kind == "event" and record["event"] in ("failure_detected", "run_finished", "scale_up"):
            self.armed = False


@pytest.mark.parametrize("recovery", ["checkpoint", "live"])
def test_no_compile_on_the_training_thread_while_the_watchdog_is_armed(tmp_path, recovery):
    from trainer.elastic.loop import train

    # A shape no other test compiles, so every compile of this run happens here; saves every 4 steps and a
    # kill at step 6 make the loop save, fail, restore and save again.
    cfg = tiny_config(tmp_path, steps=12, checkpoint_period=4, d_model=24, recovery=recovery, fault=("1@6",),
                      revive_after=0.0, stall_timeout_seconds=600.0)
    probe = _ArmedCompiles()
    jax.monitoring.register_event_duration_secs_listener(probe.on_duration)
    try:
        result = train(cfg, observer=probe.observe)
    finally:
        jax.monitoring.unregister_event_duration_listener(probe.on_duration)
    assert result.final_step == 12 and result.recoveries == 1
    assert probe.total > 0  # the probe sees this run's compiles (the step's at least)
    assert probe.during == []

"""After train() returns or raises: no leaked threads, no leaked device arrays (item viii)."""

from __future__ import annotations

import threading

import jax
import pytest

from elxpk_contract.faults import FaultSchedule
from tests.support.runs import tiny_config
from trainer.elastic.loop import train


def _live_arrays() -> int:
    return len(jax.live_arrays())


def _threads(before: set[str] = frozenset()) -> set[str]:
    # orbax's run_sync closes its event loops with loop.close(), which shuts the loop's default executor
    # down without waiting: its new worker ("asyncio_N") has been told to exit but may still be running.
    # Let those finish; a worker that was never told to exit blocks on its queue and still fails the test.
    for t in threading.enumerate():
        if t.name.startswith("asyncio_") and t.name not in before:
            t.join(timeout=10)
    return {t.name for t in threading.enumerate() if t.is_alive()}


def _run_with_a_kill(path):
    return train(tiny_config(path, steps=10), faults=FaultSchedule.parse(["1@6", "1@save:8"], revive_after=0.0))


def test_no_threads_or_arrays_outlive_a_run_with_failures(tmp_path, pause_resume_run):
    # pause_resume_run has already started orbax's and jax's process-wide helpers, if any.
    threads, arrays = _threads(), _live_arrays()
    result = _run_with_a_kill(tmp_path / "a")
    assert result.attempts == 3
    assert _threads(threads) == threads
    assert _live_arrays() == arrays


def test_nothing_outlives_a_run_that_raises(tmp_path, pause_resume_run):
    threads, arrays = _threads(), _live_arrays()
    with pytest.raises(Exception, match="DATA_LOSS"):
        train(tiny_config(tmp_path, elastic_enabled=False), faults=FaultSchedule.parse(["1@save:4"], 0.0))
    assert _threads(threads) == threads
    assert _live_arrays() == arrays

"""Error handling of the elastic loop (item vi): what is retried, what is not, and bounded waits."""

from __future__ import annotations

import jax
import pytest

from elxpk_contract.errors import CheckFailed, Timeout
from elxpk_contract.exit_codes import SLICE_LOST, USER_ERROR
from elxpk_contract.faults import FaultSchedule
from tests.support.clock import ManualClock
from tests.support.runs import read_jsonl, tiny_config
from trainer.data.data import ElasticIterator, SyntheticTokens
from trainer.elastic.loop import train
from trainer.elastic.policy import classify


class FailingData(ElasticIterator):
    """The real iterator, except that serving `step`'s batch raises `error` (every time, like a bug)."""

    def __init__(self, cfg, step: int, error: Exception):
        super().__init__(SyntheticTokens(cfg.vocab_size, cfg.seq_len, cfg.seed), cfg.global_batch)
        self.fail_at, self.error, self.raised = step * cfg.global_batch, error, 0

    def next_batch(self):
        if self.global_next_index == self.fail_at:
            self.raised += 1
            raise self.error
        return super().next_batch()


@pytest.mark.parametrize("message, kind", [
    ("DATA_LOSS: slice 1 is gone", "slice_down"),
    ("INTERNAL: could be anything", "maybe_slice_down"),
    ("DEADLINE_EXCEEDED: rpc", "maybe_slice_down"),
    ("RESOURCE_EXHAUSTED: out of memory", None),
    ("UNAVAILABLE: later", None),
    ("compiler said INTERNAL: nope", None),  # anchored on the status prefix, not a substring
])
def test_classification_is_anchored_on_the_status(message, kind):
    assert classify(jax.errors.JaxRuntimeError(message)) == kind


def test_plain_exceptions_are_never_slice_losses():
    assert classify(RuntimeError("DATA_LOSS: not from jax")) is None


def test_non_slice_error_propagates_on_the_first_attempt(tmp_path):
    cfg = tiny_config(tmp_path)
    error = jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: simulated out of memory")
    data = FailingData(cfg, 3, error)
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        train(cfg, dataset=data)
    assert info.value is error and data.raised == 1
    assert not [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "failure_detected"]


def test_slice_loss_is_not_retried_when_elastic_is_off(tmp_path):
    with pytest.raises(jax.errors.JaxRuntimeError, match="DATA_LOSS"):
        train(tiny_config(tmp_path, elastic_enabled=False), faults=FaultSchedule.parse(["1@2"], 0.0))


def test_exhausted_budget_is_a_clear_error_carrying_the_cause(tmp_path):
    cfg = tiny_config(tmp_path, elastic_max_retries=2)
    with pytest.raises(CheckFailed, match="attempt 2 of 2 failed .*DATA_LOSS.*--elastic-max-retries") as info:
        train(cfg, faults=FaultSchedule.parse(["1@5", "0@9"], revive_after=0.0))
    assert isinstance(info.value.__cause__, jax.errors.JaxRuntimeError)
    assert "slice 0" in str(info.value.__cause__)
    assert info.value.exit_code == SLICE_LOST.code  # infrastructure: the group restart may still succeed


def test_maybe_slice_error_without_progress_is_not_retried_forever(tmp_path):
    cfg = tiny_config(tmp_path, elastic_max_retries=10)
    data = FailingData(cfg, 6, jax.errors.JaxRuntimeError("INTERNAL: deterministic bug"))
    with pytest.raises(CheckFailed, match="again with no new checkpoint") as info:
        train(cfg, dataset=data)
    assert info.value.__cause__ is data.error
    assert data.raised == 2  # retried once with a warning, then given up
    assert info.value.exit_code == USER_ERROR.code  # deterministic: the Job fails at once
    failures = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "failure_detected"]
    assert all("warning" in e for e in failures)


def test_unreachable_minimum_slice_count_times_out_within_timeout_plus_poll(tmp_path):
    clock = ManualClock()
    cfg = tiny_config(tmp_path, elastic_timeout_seconds=30, elastic_poll_seconds=4.0)
    with pytest.raises(Timeout, match="1 of 2 slices healthy \\[0\\] .* 2 needed") as info:
        train(cfg, faults=FaultSchedule.parse(["1@3"]), clock=clock)  # never revived
    assert clock.slept <= cfg.elastic_timeout_seconds + cfg.elastic_poll_seconds
    assert clock.slept >= cfg.elastic_timeout_seconds - cfg.elastic_poll_seconds
    assert "--elastic-timeout-seconds" in str(info.value)

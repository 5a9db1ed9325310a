"""ElasticPolicy: the elastic loop's decisions from the settings, checked without training."""

from __future__ import annotations

import jax
import pytest

from elxpk_contract.errors import Timeout
from elxpk_contract.settings import TrainerConfig
from tests.support.clock import ManualClock
from trainer.elastic.policy import ElasticPolicy, Verdict

DATA_LOSS = jax.errors.JaxRuntimeError("DATA_LOSS: slice 1 is gone")
INTERNAL = jax.errors.JaxRuntimeError("INTERNAL: maybe a slice, maybe a bug")


class Slices:
    """A backend stand-in: a fixed set of healthy slices out of `num_slices` (the policy's only questions)."""

    def __init__(self, num_slices: int, healthy: list[int]):
        self.num_slices, self.healthy, self.asked = num_slices, healthy, 0

    def healthy_slices(self) -> list[int]:
        self.asked += 1
        return list(self.healthy)

    def revived(self, active) -> list[int]:
        self.asked += 1
        return sorted(set(self.healthy) - set(active))


def _policy(**settings) -> ElasticPolicy:
    return ElasticPolicy(TrainerConfig(**{"elastic_enabled": True, "num_slices": 4, "devices_per_slice": 1,
                                          "global_batch": 12, **settings}))


def test_pause_and_resume_waits_for_all_slices_and_resize_for_k():
    assert _policy().min_slices == 4
    assert _policy(elastic_min_slice_count=3).min_slices == 3
    slices, clock = Slices(4, [0, 2, 3]), ManualClock(0.0)
    assert _policy(elastic_min_slice_count=3).wait_for_slices(slices, clock) == ([0, 2, 3], 0.0)
    with pytest.raises(Timeout, match="3 of 4 slices healthy .* 4 needed"):
        _policy(elastic_timeout_seconds=5, elastic_poll_seconds=1.0).wait_for_slices(slices, clock)
    assert 4.0 <= clock.now <= 5.0  # never sleeps past the deadline


def test_scale_up_only_when_resizing_and_degraded():
    slices = Slices(4, [0, 1, 2, 3])
    assert _policy().scale_up_ready(slices, [0, 1, 2]) == []  # pause-and-resume never resizes
    assert slices.asked == 0
    resize = _policy(elastic_min_slice_count=2)
    assert resize.scale_up_ready(slices, [0, 1, 2, 3]) == []  # at full width: no probe
    assert slices.asked == 0
    assert resize.scale_up_ready(slices, [0, 2]) == [1, 3]


def test_slice_losses_are_retried_until_the_budget_is_spent():
    policy = _policy(elastic_max_retries=3)
    assert policy.judge(DATA_LOSS, 1, latest_committed=None) == Verdict("slice_down")
    assert policy.judge(DATA_LOSS, 2, latest_committed=None) == Verdict("slice_down")  # no guard for DATA_LOSS
    verdict = policy.judge(DATA_LOSS, 3, latest_committed=None)
    assert verdict.kind == "slice_down"
    assert verdict.give_up == ("elastic: attempt 3 of 3 failed (DATA_LOSS: slice 1 is gone); retry budget "
                               "exhausted (raise --elastic-max-retries)")


def test_maybe_slice_errors_need_a_new_checkpoint_between_failures():
    policy = _policy()
    assert policy.judge(INTERNAL, 1, latest_committed=None).give_up is None  # the first one is retried
    assert policy.judge(INTERNAL, 2, latest_committed=4).give_up is None  # step 4 committed since
    verdict = policy.judge(INTERNAL, 3, latest_committed=4)
    assert verdict.kind == "maybe_slice_down" and "again with no new checkpoint" in verdict.give_up


@pytest.mark.parametrize("error, settings", [
    (jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: oom"), {}),
    (RuntimeError("DATA_LOSS: not from jax"), {}),
    (DATA_LOSS, {"elastic_enabled": False}),
])
def test_errors_that_are_not_elastic_events_propagate(error, settings):
    assert _policy(**settings).judge(error, 1, None) == Verdict(None)


def test_a_backend_without_in_process_retry_never_retries():
    cfg = TrainerConfig(elastic_enabled=True)
    assert ElasticPolicy(cfg, in_process_retry=False).judge(DATA_LOSS, 1, None) == Verdict(None)

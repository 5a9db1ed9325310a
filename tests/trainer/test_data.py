"""Synthetic data addressed by global example id; the position is examples consumed."""

from __future__ import annotations

import numpy as np

from trainer.data.data import ElasticIterator, SyntheticTokens


def test_examples_are_a_pure_function_of_seed_and_id():
    data = SyntheticTokens(vocab_size=64, seq_len=16, seed=3)
    whole = data.examples(0, 32)
    assert np.array_equal(whole[10:20], data.examples(10, 20))
    assert not np.array_equal(whole, SyntheticTokens(64, 16, 4).examples(0, 32))
    assert whole.dtype == np.int32 and whole.min() >= 0 and whole.max() < 64


def test_state_survives_a_change_of_batch_partition():
    it = ElasticIterator(SyntheticTokens(64, 16, 3), global_batch=8)
    first = it.next_batch()
    state = it.get_state()
    second = it.next_batch()
    resumed = ElasticIterator(SyntheticTokens(64, 16, 3), global_batch=8)
    resumed.set_state(state)
    again = resumed.next_batch()
    assert (first.first, first.end, state) == (0, 8, {"global_next_index": 8})
    assert (again.first, again.end) == (second.first, second.end) == (8, 16)
    assert np.array_equal(again.tokens, second.tokens)

"""The observer seam: it receives exactly the records written to metrics.jsonl and events.jsonl."""

from __future__ import annotations

from tests.support.runs import read_jsonl, tiny_config
from trainer.data.data import ElasticIterator, SyntheticTokens
from trainer.elastic.loop import train


class RepeatsABatchAfterRestore(ElasticIterator):
    """A deliberately broken loader: after every restore it serves the previous batch again."""

    def set_state(self, state):
        super().set_state(state)
        if self.global_next_index:
            self.global_next_index -= self.global_batch


def test_observer_sees_exactly_what_is_written(tmp_path):
    seen = []
    train(tiny_config(tmp_path, steps=6), observer=lambda kind, record: seen.append((kind, record)))
    assert [r for k, r in seen if k == "metric"] == read_jsonl(tmp_path / "metrics.jsonl")
    assert [r for k, r in seen if k == "event"] == read_jsonl(tmp_path / "events.jsonl")


def test_an_injected_loader_that_repeats_data_shows_up_in_the_metrics(tmp_path):
    from elxpk_contract.faults import FaultSchedule

    cfg = tiny_config(tmp_path, steps=8)
    data = RepeatsABatchAfterRestore(SyntheticTokens(cfg.vocab_size, cfg.seq_len, cfg.seed), cfg.global_batch)
    train(cfg, dataset=data, faults=FaultSchedule.parse(["1@6"], revive_after=0.0))
    last = {}
    for record in read_jsonl(tmp_path / "metrics.jsonl"):
        last[record["step"]] = record["examples"]
    assert last[4] == last[3]  # the repeat is recorded, so `elxpk compare` can catch it

"""Training data addressed by global example index: synthetic tokens (the default) or `--data` files.

Every example has an id (its global index) and its tokens are a pure function of (seed, id), so any
process, mesh or restart produces the same batch for the same ids. The iterator's whole state is the
number of global examples consumed (grain's ElasticIterator semantics): it survives a change of slice
count, and a restored run reads each example exactly once.

A data source for `trainer.elastic.loop.train(dataset=...)` is any object with:
    next_batch() -> Batch            the next `global_batch` examples, advancing the position
    get_state() -> dict              JSON-serialisable position, saved inside every checkpoint
    set_state(state: dict) -> None   rewind/advance to a saved position (called on every restore)
`Batch.first/end` must name the ids actually served: metrics.jsonl records them, and `elxpk compare`
checks them for exactly-once consumption.

Real token data (`--data`, trainer/data/tokens.py) is served the same way: example i is a fixed slice of one
token stream, so resume and resize keep every example exactly once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from elxpk_contract.setting_rules import said

if TYPE_CHECKING:
    from elxpk_contract.settings import TrainerConfig

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a cheap, well-spread hash of uint64 inputs."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return (x ^ (x >> np.uint64(31))) & _MASK


@dataclass(frozen=True)
class Batch:
    first: int  # global id of the first example
    end: int  # one past the last id: the batch holds ids [first, end)
    tokens: np.ndarray  # int32 [end - first, seq_len + 1]: inputs are [:, :-1], targets [:, 1:]


@dataclass(frozen=True)
class SyntheticTokens:
    """Arithmetic progressions mod vocab with 10% noise: learnable, so the loss visibly falls."""

    vocab_size: int
    seq_len: int
    seed: int

    def examples(self, first: int, end: int) -> np.ndarray:
        ids = np.arange(first, end, dtype=np.uint64)[:, None]
        pos = np.arange(self.seq_len + 1, dtype=np.uint64)[None, :]
        with np.errstate(over="ignore"):
            key = _mix(ids * np.uint64(0x9E3779B97F4A7C15) + np.uint64(self.seed))
            v = np.uint64(self.vocab_size)
            start = _mix(key ^ np.uint64(1)) % v
            stride = np.uint64(1) + _mix(key ^ np.uint64(2)) % (v - np.uint64(1))
            clean = (start + stride * pos) % v
            noise_key = _mix(key + pos * np.uint64(0xD6E8FEB86659FD93))
            noisy = (noise_key % np.uint64(10)) == np.uint64(0)
        return np.where(noisy, (noise_key >> np.uint64(8)) % v, clean).astype(np.int32)


class Examples(Protocol):
    """Examples by global id: SyntheticTokens, or trainer.data.tokens.TokenStream for --data."""

    def examples(self, first: int, end: int) -> np.ndarray: ...  # int32 [end - first, seq_len + 1]


class DataSource(Protocol):
    """What the trainer reads batches from (`train(dataset=...)`); ElasticIterator is the real one."""

    def next_batch(self) -> Batch: ...

    def get_state(self) -> dict: ...  # saved in every checkpoint

    def set_state(self, state: dict) -> None: ...  # called on every restore


class ElasticIterator:
    """Serves consecutive global batches; the position is global examples consumed."""

    def __init__(self, dataset: Examples, global_batch: int) -> None:
        self.dataset = dataset
        self.global_batch = global_batch
        self.global_next_index = 0

    def next_batch(self) -> Batch:
        first = self.global_next_index
        end = first + self.global_batch
        batch = Batch(first, end, self.dataset.examples(first, end))
        self.global_next_index = end
        return batch

    def get_state(self) -> dict:
        return {"global_next_index": self.global_next_index}

    def set_state(self, state: dict) -> None:
        self.global_next_index = int(state["global_next_index"])


def open_dataset(cfg: TrainerConfig) -> tuple[TrainerConfig, ElasticIterator]:
    """The run's data source, and `cfg` with the dataset's identity (part of the checkpoint fingerprint).

    With --data the files are opened and checked here, before anything is compiled: format, dtype, enough
    tokens for steps x global_batch examples, and the vocabulary (UsageError, one line per problem).
    """

    if cfg.data is None:
        return cfg, ElasticIterator(SyntheticTokens(cfg.vocab_size, cfg.seq_len, cfg.seed), cfg.global_batch)
    from trainer.data.tokens import open_stream

    stream = open_stream(cfg.data, cfg.seq_len, cfg.vocab_size)
    stream.check_run(cfg.steps * cfg.global_batch, f"{said('steps')} {cfg.steps} x {said('global_batch')} {cfg.global_batch}")
    return dataclasses.replace(cfg, dataset_identity=stream.info.identity()), ElasticIterator(stream, cfg.global_batch)

"""Real token data for `--data`: one token stream, read by global example id.

Two file formats hold the same thing, a 1-D stream of uint16 or uint32 token ids:
- `.npy`: one 1-D array (what nanoGPT's and Olmo's preparation scripts write). Local files are
  memory-mapped; `gs://` and other object-store URLs go through etils.epath (the checkpoints'
  filesystem layer) with one ranged read per batch.
- `.array_record`: ArrayRecord files (MaxText's format), read with grain's ArrayRecordDataSource by record
  index. Each record is one `.npy` blob (numpy's `np.save` bytes, so it carries its dtype) of a 1-D chunk
  of the stream; every record but the very last holds the same number of tokens, so the record of any
  token is found by division. Several files (comma-separated) are one stream in the order given.
  Local paths only: the reader opens files itself (use a gcsfuse mount for a bucket).

Example `i` is tokens[i * seq_len : i * seq_len + seq_len + 1]: seq_len inputs and, shifted by one, their
targets. Consecutive examples share one token, so every token after the first is a target exactly once.
A stream of N tokens holds (N - 1) // seq_len examples; the run needs steps x global_batch of them, as
examples are never repeated (no epochs): a shortfall is refused when the data is opened, before compile.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from elxpk_contract.errors import UsageError
from elxpk_contract.setting_rules import said
from elxpk_storage import gcs_auth

TOKEN_DTYPES = (np.dtype("uint16"), np.dtype("uint32"))
_HASH_SPAN = 1 << 20  # bytes hashed at each end of the stream for the dataset identity
_START_CHECK_TOKENS = 1 << 24  # tokens checked against the vocabulary when the data is opened


@dataclass(frozen=True)
class StreamInfo:
    """What was found when the data was opened."""

    path: str
    kind: str  # "npy" or "array_record"
    dtype: np.dtype
    num_tokens: int
    content_hash: str  # sha256 of the stream's first and last MiB (and the record length), 16 hex digits

    def identity(self) -> str:
        """The dataset part of the checkpoint fingerprint: another file, dtype or length is another run."""
        return f"{self.kind}:{self.path}:{self.dtype.name}:{self.num_tokens}:{self.content_hash}"


class TokenStream:
    """Examples of a token stream by global id: `examples(first, end)` as the synthetic data does."""

    def __init__(self, reader: _Reader, seq_len: int, vocab_size: int) -> None:
        self.reader, self.info = reader, reader.info
        self.seq_len, self.vocab_size = seq_len, vocab_size

    @property
    def num_examples(self) -> int:
        return max(0, (self.info.num_tokens - 1) // self.seq_len)

    def examples(self, first: int, end: int) -> np.ndarray:
        """int32 [end - first, seq_len + 1], checked against the vocabulary."""
        if end > self.num_examples:
            raise UsageError(f"{said('data')} {self.info.path}: example {end - 1} is past the end of the data "
                             f"({self.num_examples} examples of {said('seq_len')} {self.seq_len})")
        span = self.reader.read(first * self.seq_len, end * self.seq_len + 1)
        self.check_vocab(span, first)
        starts = np.arange(end - first)[:, None] * self.seq_len + np.arange(self.seq_len + 1)[None, :]
        return span[starts].astype(np.int32)

    def check_vocab(self, span: np.ndarray, first: int) -> None:
        if span.size and int(span.max()) >= self.vocab_size:
            at = int(np.argmax(span >= self.vocab_size))
            raise UsageError(f"{said('data')} {self.info.path}: token id {int(span[at])} (near example "
                             f"{first + at // self.seq_len}) is not below {said('vocab_size')} {self.vocab_size}; "
                             f"set {said('vocab_size')} to at least {int(span.max()) + 1} (the tokenizer's size)")

    def check_run(self, examples_needed: int, what: str) -> None:
        """Refuse a run that would read past the data; check its tokens against the vocabulary."""
        if examples_needed > self.num_examples:
            raise UsageError(
                f"{said('data')} {self.info.path}: {self.info.num_tokens} tokens make {self.num_examples} examples of "
                f"{said('seq_len')} {self.seq_len} (seq_len + 1 tokens each, one shared), the run needs "
                f"{examples_needed} ({what}); give more tokens or train fewer {said('steps')}")
        # The start of the stream now (a wrong --vocab-size shows at once); each batch is checked as served.
        self.check_vocab(self.reader.read(0, min(examples_needed * self.seq_len + 1, _START_CHECK_TOKENS)), 0)


class _Reader:
    info: StreamInfo

    def read(self, start: int, stop: int) -> np.ndarray:
        """Tokens [start, stop) of the stream in their stored dtype."""
        raise NotImplementedError


def _bad(path: str, why: str) -> UsageError:
    return UsageError(f"{said('data')} {path}: {why}")


def _header(path: str, handle: Any) -> tuple[np.dtype, int, int]:
    """(dtype, token count, data offset) from a .npy header; one-line errors for anything else."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(handle)
        read = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(version)
        if read is None:
            raise _bad(path, f".npy format version {version} is not supported; save with numpy's np.save")
        shape, _, dtype = read(handle)
    except (ValueError, OSError, EOFError) as exc:
        raise _bad(path, f"not a readable .npy file ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
                   ) from None
    if len(shape) != 1:
        raise _bad(path, f"holds a {len(shape)}-D array of shape {tuple(shape)}; it must be one 1-D token stream "
                         "(flatten it: np.save(path, tokens.reshape(-1)))")
    if dtype.newbyteorder("=") not in TOKEN_DTYPES:
        raise _bad(path, f"token dtype {dtype} is not supported; use uint16 (vocabularies up to 65536) or uint32")
    return dtype, int(shape[0]), handle.tell()


def _content_hash(head: bytes, tail: bytes, extra: str = "") -> str:
    return hashlib.sha256(head + b"|" + tail + extra.encode()).hexdigest()[:16]


class NpyReader(_Reader):
    """A .npy token stream: memory-mapped when local, ranged reads through epath for object stores."""

    def __init__(self, path: str) -> None:
        from etils import epath

        self.path = path
        if gcs_auth.is_gcs(path):  # else its client retries for ever without credentials
            gcs_auth.require_credentials(f"{said('data')} {path:.200}")
        self._file = epath.Path(path)
        try:
            size = self._file.stat().length
            with self._file.open("rb") as handle:
                dtype, count, offset = _header(path, handle)
        except FileNotFoundError:
            raise _bad(path, "no such file") from None
        except IsADirectoryError:
            raise _bad(path, "is a directory; give the .npy file") from None
        if offset + count * dtype.itemsize != size:
            raise _bad(path, f"truncated or padded: its header promises {count} {dtype.name} tokens "
                             f"({offset + count * dtype.itemsize} bytes), the file has {size} bytes; "
                             "rewrite it with np.save")
        self.dtype, self.offset = dtype, offset
        self._local = not _is_url(path)
        self._map = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(count,)) if self._local and count \
            else None
        span = min(count, _HASH_SPAN // dtype.itemsize)
        head, tail = self.read(0, span).tobytes(), self.read(count - span, count).tobytes()
        self.info = StreamInfo(path, "npy", dtype, count, _content_hash(head, tail))

    def read(self, start: int, stop: int) -> np.ndarray:
        if self._map is not None:
            return np.asarray(self._map[start:stop])
        if stop <= start:
            return np.zeros((0,), self.dtype)
        with self._file.open("rb") as handle:
            handle.seek(self.offset + start * self.dtype.itemsize)
            data = handle.read((stop - start) * self.dtype.itemsize)
        return np.frombuffer(data, dtype=self.dtype)


class ArrayRecordReader(_Reader):
    """ArrayRecord files of .npy-encoded chunks (see the module docstring), by record index via grain."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.path = ",".join(paths)
        for path in paths:
            if _is_url(path):
                raise _bad(self.path, "ArrayRecord files are read from local paths (grain opens them itself); "
                                      "copy them, mount the bucket with gcsfuse, or convert to .npy")
            if not os.path.isfile(path):
                raise _bad(self.path, f"{path}: no such file")
        import grain.python as grain

        try:
            self._source = grain.ArrayRecordDataSource(list(paths))
            records = len(self._source)
        except Exception as exc:  # noqa: BLE001 - the C++ reader's errors vary; the path and the first line say enough
            raise _bad(self.path, f"not a readable ArrayRecord file ({_first_line(exc)})") from None
        if records == 0:
            raise _bad(self.path, "holds no records")
        self._cache: dict[int, np.ndarray] = {}
        first = self._record(0)
        self.dtype, self.record_tokens = first.dtype, len(first)
        last = self._record(records - 1, last=True)
        count = (records - 1) * self.record_tokens + len(last)
        extra = f"{records}x{self.record_tokens}"
        self.info = StreamInfo(self.path, "array_record", self.dtype, count,
                               _content_hash(first.tobytes()[:_HASH_SPAN], last.tobytes()[-_HASH_SPAN:], extra))
        self._records = records

    def _record(self, index: int, last: bool = False) -> np.ndarray:
        if index in self._cache:
            return self._cache[index]
        where = f"record {index}"
        try:
            blob = self._source[index]
            with io.BytesIO(blob) as handle:
                dtype, count, offset = _header(where, handle)
        except UsageError as exc:
            raise _bad(self.path, str(exc).removeprefix(f"{said('data')} ")) from None
        if offset + count * dtype.itemsize != len(blob):
            raise _bad(self.path, f"{where} is truncated: {len(blob)} bytes for {count} {dtype.name} tokens")
        tokens = np.frombuffer(blob, dtype=dtype, count=count, offset=offset)
        if index and dtype != self.dtype:
            raise _bad(self.path, f"{where} holds {dtype.name} tokens, record 0 {self.dtype.name}; use one dtype")
        if index and not last and count != self.record_tokens:
            raise _bad(self.path, f"{where} holds {count} tokens, record 0 {self.record_tokens}; every record but "
                                  "the last must hold the same number (write them with trainer.data.tokens.write_array_record)")
        if len(self._cache) >= 8:  # consecutive batches share records; keep only the latest few
            self._cache.pop(next(iter(self._cache)))
        self._cache[index] = tokens
        return tokens

    def read(self, start: int, stop: int) -> np.ndarray:
        if stop <= start:
            return np.zeros((0,), self.dtype)
        size = self.record_tokens
        first, last = start // size, (stop - 1) // size
        chunk = np.concatenate([self._record(r, last=r == self._records - 1) for r in range(first, last + 1)])
        return chunk[start - first * size: stop - first * size]


def open_stream(path: str, seq_len: int, vocab_size: int) -> TokenStream:
    """The token stream at `path` (.npy, or comma-separated .array_record files); UsageError when unusable."""
    paths = [p.strip() for p in path.split(",") if p.strip()]
    if paths and all(_is_array_record(p) for p in paths):
        return TokenStream(ArrayRecordReader(paths), seq_len, vocab_size)
    if len(paths) == 1 and paths[0].endswith(".npy"):
        return TokenStream(NpyReader(paths[0]), seq_len, vocab_size)
    raise _bad(path, "use one .npy file of a 1-D token stream, or .array_record files (comma-separated)")


def write_npy(path: str, tokens: np.ndarray) -> None:
    """Save a token stream as --data reads it (uint16 when every id fits, else uint32)."""
    np.save(path, _as_tokens(tokens))


def write_array_record(path: str, tokens: np.ndarray, record_tokens: int = 1 << 16) -> int:
    """Write a token stream as ArrayRecord chunks of `record_tokens` tokens (the last one shorter); returns
    the number of records. group_size:1 keeps every record independently readable (random access)."""
    from array_record.python.array_record_module import ArrayRecordWriter

    stream = _as_tokens(tokens)
    writer = ArrayRecordWriter(path, "group_size:1")
    try:
        count = 0
        for start in range(0, len(stream), record_tokens):
            blob = io.BytesIO()
            np.save(blob, stream[start:start + record_tokens])
            writer.write(blob.getvalue())
            count += 1
    finally:
        writer.close()
    return count


def _as_tokens(tokens: np.ndarray) -> np.ndarray:
    flat = np.asarray(tokens).reshape(-1)
    if flat.size and (flat.min() < 0 or flat.max() >= 2**32):
        raise ValueError("token ids must be in [0, 2**32)")
    return flat.astype(np.uint16 if not flat.size or flat.max() < 2**16 else np.uint32)


def _is_url(path: str) -> bool:
    return "://" in path


def _is_array_record(path: str) -> bool:
    return path.endswith(".array_record") or ".array_record-" in path


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__

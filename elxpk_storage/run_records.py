"""The run's records on an object store (`--run-dir gs://...`): append-only chunks, one prefix per writer.

An object is written whole and never appended to, so the trainer's metrics.jsonl and events.jsonl become
numbered chunks there, each a few seconds of lines, uploaded once and never rewritten:

    RUN/records/w<generation>-p<process>/metrics-<seq>.jsonl
    RUN/records/w<generation>-p<process>/events-<seq>.jsonl
    RUN/records/w<generation>-p<process>/run.json

A writer (one trainer process) takes the generation after the largest it finds under RUN/records/ when it
starts, so a restarted process never writes a name an earlier one wrote, and orders after it without
trusting any clock; the process index keeps two processes of one attempt apart. The readers
(elxpk/runs/rundir.py) list every chunk and read them in (generation, process, seq) order: the lines of one
run, as one file would hold them; run.json is the newest writer's. A local run directory keeps its three
files (a `records/` folder there, e.g. a copy of a gs:// run, is read the same way).

The file system is fsspec's (gcsfs for gs://, the `trainer` extra; what orbax's etils.epath uses too), made
here after the credential check (elxpk_storage/gcs_auth.py). Nothing here is imported on rendering's path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from elxpk_storage import gcs_auth

RECORDS = "records"
RUN_JSON = "run.json"
KINDS = ("metrics", "events")
# A writer's numbers are bounded: a folder planted with a 990-digit generation made every later writer's
# chunk names too long for the store (21 records lost, issue 51). A name past these widths is no writer's:
# readers pass over it and the next writer's generation ignores it. MAX_GENERATION leaves the next writer room
# (one more digit than any generation taken into account).
MAX_GENERATION = 10**15 - 1
_WRITER = re.compile(r"w(\d{6,16})-p(\d{5,9})")
_CHUNK = re.compile(r"(metrics|events)-(\d{8,18})\.jsonl")
CAT_BATCH = 32  # chunks fetched at once while reading: bounded memory, one round trip per batch
CHUNK_PART_BYTES = 1 << 20  # what is fetched of a chunk at a time: the batch holds 32 MiB at most
# Inside a checkpoint directory on an object store: the run dir `workload create` renders (ELXPK_RUN_DIR),
# so a run's records live beside its checkpoints and outlive its pods. Not a step number, so never a step
# (elxpk_storage/checkpoint_files.py is_step_dir); `checkpoint inspect` passes over it.
RUN_DIR_INSIDE = "elxpk-run"


def run_dir_beside(checkpoint_dir: str) -> str | None:
    """The run dir a rendered workload writes its records to: inside an object-store checkpoint directory
    (None for a local one: a pod's local path vanishes with it, and a shared mount is the user's to name)."""
    if not is_remote(checkpoint_dir):
        return None
    return f"{checkpoint_dir.rstrip('/')}/{RUN_DIR_INSIDE}"


def is_remote(run_dir: str) -> bool:
    """Whether `run_dir` names an object store (written as chunks), not a local directory."""
    return "://" in run_dir


def store(run_dir: str, flag: str = "--run-dir") -> tuple[Any, str]:
    """(fsspec file system, root path inside it) for `run_dir`; a gs:// one first needs credentials or an
    emulator (UsageError naming `flag`: without them gcsfs retries anonymous requests instead of failing)."""
    import fsspec  # lazy: only a chunked run directory loads fsspec (and gcsfs for gs://)

    from elxpk_storage.checkpoint_files import no_listing_cache  # lazy: etils, only for a chunked run

    if gcs_auth.is_gcs(run_dir):
        gcs_auth.require_credentials(f"{flag} {run_dir:.200}")
        gcs_auth.require_bucket(f"{flag} {run_dir:.200}", run_dir)
        no_listing_cache()  # the writer's own listing must see every earlier writer, not a cached answer
    fs, root = fsspec.core.url_to_fs(run_dir)
    return fs, root.rstrip("/")


@dataclass(frozen=True, order=True)
class Chunk:
    generation: int
    process: int
    seq: int
    path: str  # inside the file system, as listed


def writer_name(generation: int, process: int) -> str:
    return f"w{generation:06d}-p{process:05d}"


def chunk_name(kind: str, seq: int) -> str:
    return f"{kind}-{seq:08d}.jsonl"


def parse_writer(name: str) -> tuple[int, int] | None:
    """(generation, process) of a writer's folder name; None for a name no writer makes."""
    found = _WRITER.fullmatch(name)
    return (int(found[1]), int(found[2])) if found else None


def ordered_chunks(paths: Iterable[str], kind: str) -> list[Chunk]:
    """The chunks of `kind` among listed object paths, in the order they were written: by writer generation,
    then process, then sequence number. Any other name (run.json, a stray upload, a tool's temporary
    object) is not a chunk and is left out; numbers compare as numbers, so width never reorders them."""
    chunks = []
    for path in paths:
        parts = path.rstrip("/").split("/")
        if len(parts) < 3 or parts[-3] != RECORDS:
            continue
        writer, name = parse_writer(parts[-2]), _CHUNK.fullmatch(parts[-1])
        if writer is None or name is None or name[1] != kind:
            continue
        chunks.append(Chunk(writer[0], writer[1], int(name[2]), path))
    return sorted(chunks)


def newest_run_json(paths: Iterable[str]) -> str | None:
    """The run.json of the newest writer that wrote one (a resumed run's session wrote the last)."""
    found = []
    for path in paths:
        parts = path.rstrip("/").split("/")
        if len(parts) >= 3 and parts[-3] == RECORDS and parts[-1] == RUN_JSON:
            writer = parse_writer(parts[-2])
            if writer is not None:
                found.append((writer, path))
    return max(found)[1] if found else None


def _storage(call, *args: Any) -> Any:
    """`call(*args)` on the file system; any failure but a missing object as OSError (gcsfs raises its own
    HttpError for a 5xx after its retries, ValueError for a 400): readers tell storage from records by it."""
    try:
        return call(*args)
    except OSError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the client raises is a storage failure here
        raise OSError(f"{type(exc).__name__}: {str(exc)[:300]}") from exc


def listing(fs: Any, root: str) -> list[str]:
    """Every object under ROOT/records (empty when there is none)."""
    try:
        return sorted(_storage(fs.find, f"{root}/{RECORDS}"))
    except FileNotFoundError:
        return []


def has_records(fs: Any, root: str) -> bool:
    return bool(ordered_chunks(listing(fs, root), "metrics"))


def read_chunks(fs: Any, chunks: list[Chunk]) -> Iterator[tuple[Chunk, Iterator[bytes]]]:
    """Each chunk, in order, as its bytes in parts of at most CHUNK_PART_BYTES: the first part of
    `CAT_BATCH` chunks fetched at once (concurrently, for gcsfs), the rest of a larger chunk part by part
    as the reader asks. So a reader holds a part, not a chunk: a hostile 300 MB one-line chunk is refused
    after its first megabytes (it used to be read whole: 743 MB at the peak)."""
    for start in range(0, len(chunks), CAT_BATCH):
        batch = chunks[start:start + CAT_BATCH]
        paths = [c.path for c in batch]
        firsts = _storage(fs.cat_ranges, paths, [0] * len(paths), [CHUNK_PART_BYTES] * len(paths))
        for chunk, first in zip(batch, firsts, strict=True):
            if isinstance(first, BaseException):  # a client that returns a failure in place
                raise OSError(f"{type(first).__name__}: {str(first)[:300]}") from first
            yield chunk, _parts(fs, chunk.path, first)


def _parts(fs: Any, path: str, first: bytes) -> Iterator[bytes]:
    part, offset = first, len(first)
    if part:
        yield part
    while len(part) == CHUNK_PART_BYTES:  # a full part: there may be more
        part = _storage(fs.cat_file, path, offset, offset + CHUNK_PART_BYTES)
        offset += len(part)
        if part:
            yield part


def read_object(fs: Any, path: str, most: int) -> bytes:
    """The first `most` bytes of one object (a run.json)."""
    return _storage(fs.cat_file, path, 0, most)


class ChunkWriter:
    """One writer's uploads: numbered chunks of each kind and its run.json, never an existing name."""

    def __init__(self, run_dir: str, process: int):
        self.fs, self.root = store(run_dir)
        generations = [w[0] for p in listing(self.fs, self.root)
                       if len(parts := p.rstrip("/").split("/")) >= 2 and (w := parse_writer(parts[-2]))
                       and w[0] <= MAX_GENERATION]
        self.prefix = f"{self.root}/{RECORDS}/{writer_name(max(generations, default=0) + 1, process)}"
        self.fs.makedirs(self.prefix, exist_ok=True)  # a local copy needs its folder; a bucket has none
        self._seq = dict.fromkeys(KINDS, 0)

    def put_chunk(self, kind: str, data: bytes) -> str:
        """Upload the next chunk of `kind`; its number is spent only once the upload succeeded."""
        path = f"{self.prefix}/{chunk_name(kind, self._seq[kind])}"
        self.fs.pipe_file(path, data)
        self._seq[kind] += 1
        return path

    def put_run_json(self, data: bytes) -> None:
        self.fs.pipe_file(f"{self.prefix}/{RUN_JSON}", data)

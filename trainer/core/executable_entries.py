"""One executable store entry on disk or in a bucket: a magic line, a JSON header (the whole key, the payload's
sha256 and length), then the payload (jax's serialized executable). trainer/core/executable_store.py decides
what is stored and when; this module only reads and writes entries, and refuses any that is not whole and
made for the key asked for, before a byte of its payload is unpickled.

- Local: opened without following a link, a regular file only, its size exactly the header's; written to
  a temporary name in the same directory (0600) and renamed over the entry.
- Object store (`gs://`, through etils.epath as jax's cache and the checkpoints are): an object is whole or
  absent, so it is written in one upload; read to at most one byte past the header's length.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from pathlib import Path
from typing import IO

MAGIC = b"ELXPK-EXECUTABLE\n"
HEADER_BYTES = 1 << 20  # a key is a few KiB; a header past this is no entry of ours
PAYLOAD_BYTES = 8 << 30  # bounds the read of a hostile entry's payload; a real step is MiBs to a few GiB


def canonical(key: dict) -> bytes:
    return json.dumps(key, sort_keys=True, separators=(",", ":")).encode()


def is_remote(where: str | Path) -> bool:
    return "://" in str(where)


def read_entry(where: str | Path, key: dict) -> tuple[bytes | None, str]:
    """The payload of the entry at `where` if it is whole and made for `key`, else (None, why). Raises
    FileNotFoundError when there is none, OSError when it cannot be read."""
    if is_remote(where):
        from etils import epath  # lazy: a gs:// store only (gcsfs)

        with epath.Path(str(where)).open("rb") as handle:
            return _parse(handle, None, key)
    fd = os.open(where, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None, "refused: not a regular file"
        return _parse(handle, info.st_size, key)


def _parse(handle: IO[bytes], total: int | None, key: dict) -> tuple[bytes | None, str]:
    """`total`: the entry's size where the file system says it (else the read stops one byte past the payload)."""
    if handle.read(len(MAGIC)) != MAGIC:
        return None, "refused: not an executable entry"
    line, rest = _header_line(handle)
    if not line.endswith(b"\n"):
        return None, "refused: truncated header"
    try:
        meta = json.loads(line)
        size, digest, stored = int(meta["payload_bytes"]), str(meta["payload_sha256"]), meta["key"]
    except (ValueError, KeyError, TypeError):
        return None, "refused: unreadable header"
    wanted = json.loads(canonical(key))  # the key as JSON has it (lists, not tuples)
    if stored != wanted:
        differ = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k)) \
            if isinstance(stored, dict) else ["key"]
        return None, f"refused by key ({', '.join(differ)[:200]} differ)"
    if not 0 <= size <= PAYLOAD_BYTES or (total is not None and total != len(MAGIC) + len(line) + size):
        return None, "refused: truncated or padded payload"
    payload = rest + handle.read(size + 1 - len(rest)) if len(rest) <= size else rest
    if len(payload) != size:
        return None, "refused: truncated or padded payload"
    if hashlib.sha256(payload).hexdigest() != digest:
        return None, "refused by digest"
    return payload, ""


def _header_line(handle: IO[bytes]) -> tuple[bytes, bytes]:
    """(the header line with its newline, or what was read of it without one; the bytes read past it), reading
    at most HEADER_BYTES of it. In pieces, not `readline(limit)`: gcsfs's file (fsspec's buffered file, what
    epath opens on gs://) takes no limit there, and an entry on the bucket was unreadable on every restart."""
    held = b""
    while b"\n" not in held and len(held) < HEADER_BYTES:
        piece = handle.read(min(64 << 10, HEADER_BYTES - len(held)))
        if not piece:
            break
        held += piece
    line, newline, rest = held.partition(b"\n")
    return line + newline, rest


def _header(key: dict, payload: bytes) -> bytes:
    meta = {"key": key, "payload_sha256": hashlib.sha256(payload).hexdigest(), "payload_bytes": len(payload)}
    return MAGIC + json.dumps(meta, sort_keys=True).encode() + b"\n"


def write_entry(directory: str | Path, name: str, key: dict, payload: bytes) -> None:
    """Write the entry `name` in `directory`: a reader meets a whole entry or none. OSError when it cannot."""
    if is_remote(directory):
        from etils import epath  # lazy: a gs:// store only (gcsfs)

        (epath.Path(str(directory)) / name).write_bytes(_header(key, payload) + payload)  # one upload: whole
        return
    directory = Path(directory)
    tmp = directory / f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(_header(key, payload))
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, directory / name)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise

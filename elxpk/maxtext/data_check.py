"""`--check-data`: is a MaxText command's `grain_train_files` ArrayRecord, and does it hold records?

Opt-in (`workload create --check-data`, `workload validate --check-data`): it reads the data, on
Cloud Storage for a gs:// pattern (Application Default Credentials, elxpk/cluster/api/gcs.py). Reads are
bounded whatever the data's size: the pattern's matches come from one listing page (at most 1,000
objects); the first and the last match are checked, each by its first 64 bytes (the Riegeli file
signature every ArrayRecord file starts with) and by its record count, which array_record's reader
takes from the file's index at the end. A gs:// object lends the reader only its first 64 bytes and
its last INDEX_BYTES, in a sparse local copy: when its index is larger than that, the count comes out 0
and is not held against it (the file passes on its signature).

Each problem is one line naming `grain_train_files` and the fix (exit 2). array_record is imported only
here, when the check runs.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from elxpk.bounded_read import not_a_regular_file
from elxpk.cluster.api.gcs import Gcs
from elxpk.errors import ClusterError
from elxpk.maxtext import command as cmd
from elxpk.maxtext.data_rules import command_value

# The first 64 bytes of every Riegeli file, hence of every ArrayRecord file (the file signature: a block
# header, then the signature chunk's header). tests/maxtext/test_data_check.py checks it against files
# array_record itself writes.
SIGNATURE = bytes.fromhex("83af70d10d884a3f00000000000000004000000000000000"
                          "91bac23c9287e1a90000000000000000e19f13c0e9b1c372"
                          "73000000000000000000000000000000")
INDEX_BYTES = 4 << 20  # the tail a gs:// object lends the reader: the index of ~200k chunks fits in 1 MiB
LIST_LIMIT = 1000
_GLOB = "*?["


@dataclass(frozen=True)
class Finding:
    path: str
    records: int | None  # None: not counted (the index lies beyond the bytes read)


def grain_train_files(command: str | None) -> str | None:
    """The `grain_train_files` a MaxText command reads with dataset_type=grain, when it says so itself."""
    if not command:
        return None
    try:
        found = cmd.find_invocations(command)
    except cmd.CommandError:
        return None
    if len(found) != 1 or command_value(found[0], "dataset_type") != "grain":
        return None
    files = command_value(found[0], "grain_train_files")
    return files if isinstance(files, str) and files else None


def patterns(files: str) -> list[str]:
    """The path patterns of a grain_train_files value: ';' separates a mixture, ',WEIGHT' ends a part."""
    out = []
    for part in filter(None, (p.strip() for p in files.split(";"))):
        path, comma, weight = part.rpartition(",")
        try:
            float(weight)
        except ValueError:
            path = part
        out.append(path if comma else part)
    return out


def check_data(files: str, *, gcs_factory: Callable[[], object] | None = None) -> list[str]:
    """Problems of grain_train_files=`files`, one line each; [] when every pattern is ArrayRecord with records."""
    problems = []
    for pattern in patterns(files):
        try:
            matches = _gcs_matches(pattern, gcs_factory) if pattern.startswith("gs://") else _local_matches(pattern)
            if not matches:
                problems.append(f"grain_train_files {pattern}: matches no file; check the path (--check-data)")
                continue
            for path in dict.fromkeys([matches[0], matches[-1]]):
                problem = _check_one(path, gcs_factory)
                if problem:
                    problems.append(f"grain_train_files {pattern}: {problem} (--check-data)")
        except OSError as exc:
            problems.append(f"grain_train_files {pattern}: cannot read it: {exc.strerror or exc} (--check-data)")
        except ClusterError as exc:  # Cloud Storage: no such object or bucket, no access, no network
            problems.append(f"grain_train_files {pattern}: {exc} (--check-data)")
    return problems


def _local_matches(pattern: str) -> list[str]:
    if not any(c in pattern for c in _GLOB):
        return [pattern] if os.path.exists(pattern) else []
    return sorted(glob.glob(pattern))[:LIST_LIMIT]


def _gcs(gcs_factory, pattern: str):
    if gcs_factory is not None:
        return gcs_factory()

    return Gcs(what=f"--check-data: grain_train_files {pattern}")


def _gcs_matches(pattern: str, gcs_factory) -> list[str]:
    bucket, _, name = pattern.removeprefix("gs://").partition("/")
    cut = min((name.find(c) for c in _GLOB if c in name), default=len(name))
    listed = _gcs(gcs_factory, pattern).list_names(f"gs://{bucket}", prefix=name[:cut], limit=LIST_LIMIT)
    return [f"gs://{bucket}/{obj}" for obj in listed if fnmatch.fnmatchcase(obj, name)]


def _check_one(path: str, gcs_factory) -> str | None:
    if path.startswith("gs://"):
        gcs = _gcs(gcs_factory, path)
        size = gcs.size(path)
        head = gcs.read_range(path, 0, min(size, len(SIGNATURE)))  # an empty object has no byte 0
        tail_start = max(len(SIGNATURE), size - INDEX_BYTES)
        tail = gcs.read_range(path, tail_start, size) if size > len(SIGNATURE) else b""
    else:
        kind = not_a_regular_file(path)
        if kind == "a directory":
            return f"{path} is a directory; give a file pattern such as {path.rstrip('/')}/*.array_record"
        if kind is not None:  # a FIFO or a device would block the read or never end it
            return f"{path} is {kind}, not a regular file; MaxText's grain input needs ArrayRecord files"
        size = os.path.getsize(path)
        with open(path, "rb") as f:  # a regular file: the first bytes only
            head = f.read(len(SIGNATURE))
        tail_start, tail = 0, b""
    if head != SIGNATURE:
        what = "empty" if size == 0 else "not an ArrayRecord file (no Riegeli signature in its first bytes)"
        return f"{path} is {what}; MaxText's grain input needs ArrayRecord (grain_file_type=arrayrecord)"
    records = _count(path, size, head, tail_start, tail)
    if records == 0 and (not path.startswith("gs://") or tail_start == len(SIGNATURE)):
        return f"{path} holds no records; write data into it, or point grain_train_files at files that hold some"
    return None


def _count(path: str, size: int, head: bytes, tail_start: int, tail: bytes) -> int:
    from array_record.python.array_record_module import ArrayRecordReader

    if not path.startswith("gs://"):
        return int(ArrayRecordReader(path).num_records())
    with tempfile.TemporaryDirectory(prefix="elxpk-check-data-") as tmp:
        local = os.path.join(tmp, "sparse.array_record")
        with open(local, "wb") as f:  # sparse: only the bytes read take space
            f.truncate(size)
            f.write(head)
            f.seek(tail_start)
            f.write(tail)
        return int(ArrayRecordReader(local).num_records())


def manifest_commands(doc: object) -> list[str]:
    """Every command and argument string of a JobSet's containers (where a MaxText command would be)."""
    out: list[str] = []
    jobs = doc.get("spec", {}).get("replicatedJobs", []) if isinstance(doc, dict) else []
    for job in jobs if isinstance(jobs, list) else []:
        try:
            containers = job["template"]["spec"]["template"]["spec"]["containers"]
        except (KeyError, TypeError):
            continue
        for c in containers if isinstance(containers, list) else []:
            if isinstance(c, dict):
                out += [w for w in [*(c.get("command") or []), *(c.get("args") or [])] if isinstance(w, str)]
    return out


def check_commands(commands: list[str], *, gcs_factory: Callable[[], object] | None = None
                   ) -> tuple[list[str], list[str]]:
    """(problems, the grain_train_files values checked) for the MaxText commands among `commands`."""
    files = list(dict.fromkeys(f for f in map(grain_train_files, commands) if f))
    problems = [p for f in files for p in check_data(f, gcs_factory=gcs_factory)]
    return problems, files

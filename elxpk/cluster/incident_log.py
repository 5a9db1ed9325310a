"""The durable incident record: JSONL, one incident per line, on a local disk or at gs://BUCKET/OBJECT.

Appends skip incidents whose `id` is already in the file, so `workload events --record` can run as
often as one likes (a cron, a --watch that restarts) and each incident is kept once. A local file is
appended under an exclusive lock (flock); a gs:// object through a generation precondition
(elxpk/cluster/gcs.py). Either way concurrent recorders lose no line and duplicate none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from elxpk.cluster.incidents import Incident
from elxpk.errors import ClusterError, UsageError


def _ids(content: bytes) -> set[str]:
    ids = set()
    for line in content.decode("utf-8", "replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn or foreign line: left as it is, never fatal
        if isinstance(record, dict) and "id" in record:
            ids.add(str(record["id"]))
    return ids


def _new_lines(content: bytes, incidents: list[Incident]) -> list[str]:
    seen = _ids(content)
    lines = []
    for incident in incidents:
        if incident.id not in seen:
            seen.add(incident.id)
            lines.append(json.dumps(incident.to_dict(), sort_keys=True))
    return lines


def check_record_path(path: str) -> None:
    """--record PATH problems found before any I/O (exit 2)."""
    if path.startswith("gs://"):
        bucket, _, name = path[5:].partition("/")
        if not bucket or not name or name.endswith("/"):
            raise UsageError(f"--record {path}: name an object, e.g. gs://BUCKET/incidents/RUN.jsonl")
        return
    local = Path(path)
    if local.is_dir():
        raise UsageError(f"--record {path}: is a directory; name a file, e.g. {local / 'incidents.jsonl'}")
    if not local.parent.is_dir():
        raise UsageError(f"--record {path}: directory {local.parent} does not exist; create it first")


def record(path: str, incidents: Iterable[Incident]) -> int:
    """Append the incidents not yet in PATH; how many were appended."""
    items = list(incidents)
    if path.startswith("gs://"):
        from elxpk.cluster.gcs import Gcs

        return Gcs().append_lines(path, lambda content: _new_lines(content, items))
    import fcntl

    try:
        with open(path, "a+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            content = f.read()
            lines = _new_lines(content, items)
            if lines:
                prefix = b"\n" if content and not content.endswith(b"\n") else b""
                f.write(prefix + "".join(line + "\n" for line in lines).encode())
            return len(lines)
    except OSError as exc:
        raise ClusterError(f"--record {path}: cannot append ({exc.strerror or exc})") from None


def read_recorded(path: str) -> list[dict]:
    """The incidents of a record (local or gs://); lines that are not incidents are skipped."""
    if path.startswith("gs://"):
        from elxpk.cluster.gcs import Gcs

        content, _ = Gcs().read(path)
        if content is None:
            raise ClusterError(f"{path}: no such object")
    else:
        try:
            content = Path(path).read_bytes()
        except OSError as exc:
            raise UsageError(f"--incidents {path}: cannot read ({exc.strerror or exc})") from None
    records = []
    for line in content.decode("utf-8", "replace").splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "id" in data and "kind" in data:
            records.append(data)
    return records

"""The durable incident record: JSONL, one incident per line, on a local disk or at gs://BUCKET/OBJECT.

Appends skip incidents whose `id` is already in the file, so `workload events --record` can run as
often as one likes (a cron, a --watch that restarts) and each incident is kept once. A local file is
appended under an exclusive lock (flock); a gs:// object through a generation precondition
(elxpk/cluster/api/gcs.py). Either way concurrent recorders lose no line and duplicate none.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterable
from pathlib import Path

from elxpk.bounded_read import INCIDENT_BYTES, read_input, size_text
from elxpk.cluster.api.gcs import Gcs
from elxpk.cluster.records.incidents import CAUSES, Incident
from elxpk.errors import ClusterError, UsageError
from elxpk.json_lines import JsonLinesError, decode_text, parse_lines
from elxpk_contract.storage_full import storage_full_is_infrastructure, unwritable_is_usage
from elxpk_storage import gcs_auth


def _ids(content: bytes) -> set[str]:
    ids = set()
    for line in content.decode("utf-8", "replace").splitlines():
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
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
        gcs_auth.require_credentials(f"--record {path}")  # before the cluster is asked anything
        return
    local = Path(path)
    if local.is_dir():
        raise UsageError(f"--record {path}: is a directory; name a file, e.g. {local / 'incidents.jsonl'}")
    if not local.parent.is_dir():
        raise UsageError(f"--record {path}: directory {local.parent} does not exist; create it first")
    if local.exists() and not local.is_file():  # /dev/full, /dev/zero, a FIFO: read before each append
        raise UsageError(f"--record {path}: not a regular file (a device or a pipe); name a file, e.g. "
                         "incidents.jsonl")


def record(path: str, incidents: Iterable[Incident]) -> int:
    """Append the incidents not yet in PATH; how many were appended."""
    items = list(incidents)
    if path.startswith("gs://"):
        return Gcs(what=f"--record {path}").append_lines(path, lambda content: _new_lines(content, items), limit=INCIDENT_BYTES)


    check_record_path(path)
    # out of space: exit 74, as every write elxpk makes; a read-only place: the user's, exit 2
    try:
        with storage_full_is_infrastructure(f"--record {path}", then="the incidents recorded before are intact"), \
                unwritable_is_usage("--record", path), open(path, "a+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            content = f.read(INCIDENT_BYTES + 1)
            if len(content) > INCIDENT_BYTES:
                raise UsageError(f"--record {path}: over {size_text(INCIDENT_BYTES)}; start a new record file "
                                 "(incidents already there are not read again)")
            lines = _new_lines(content, items)
            if lines:
                prefix = b"\n" if content and not content.endswith(b"\n") else b""
                f.write(prefix + "".join(line + "\n" for line in lines).encode())
            return len(lines)
    except OSError as exc:
        raise ClusterError(f"--record {path}: cannot append ({exc.strerror or exc})") from None


def read_recorded(path: str, flag: str = "--incidents") -> list[dict]:
    """The incidents of a record (local or gs://), each id once (the first line that holds it). A file that
    is not an incident record (binary, a line that is not an incident, a field of the wrong type) is a
    UsageError naming the line; only a torn last line, left by a killed recorder, is tolerated."""

    if path.startswith("gs://"):
        content, _ = Gcs(what=f"{flag} {path}").read(path, limit=INCIDENT_BYTES)
        if content is None:
            raise ClusterError(f"{path}: no such object")
        if len(content) > INCIDENT_BYTES:
            raise UsageError(f"{flag} {path}: over the {size_text(INCIDENT_BYTES)} an incident record may be")
    else:
        content = read_input(path, flag=flag, limit=INCIDENT_BYTES, text=False)
    try:
        lines = parse_lines(decode_text(content or b""), strict=True)
    except (ValueError, JsonLinesError) as exc:
        raise UsageError(f"{flag} {path}: {exc}") from None
    records: dict[str, dict] = {}
    for number, data in zip(lines.line_numbers, lines.records, strict=True):
        problem = incident_problem(data)
        if problem:
            raise UsageError(f"{flag} {path} line {number}: {problem}; is this an incident record "
                             "(`elxpk workload events --record`)?")
        records.setdefault(data["id"], data)
    return list(records.values())


# Each field of an incident and the JSON types it may hold (elxpk/cluster/records/incidents.py Incident).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,), "time": (str, type(None)), "kind": (str,), "cause": (str,), "reason": (str,),
    "message": (str,), "slice": (int, type(None)), "pod": (str, type(None)), "node": (str, type(None)),
    "container": (str, type(None)), "exit_code": (int, type(None)), "workload": (str,), "fault": (str,),
}


def incident_problem(data: dict) -> str | None:
    """What makes `data` not an incident as `workload events --record` writes it; None when it is one."""

    for key in ("id", "kind"):
        if key not in data:
            return f"no {key!r}"
    for key, types in _FIELD_TYPES.items():
        value = data.get(key)
        if key in data and (not isinstance(value, types) or isinstance(value, bool)):
            return f"{key} is {json.dumps(value)[:40]}, not {' or '.join(_JSON_NAMES[t] for t in types)}"
    if not data["id"].strip():
        return "an empty id"
    if "cause" in data and data["cause"] not in CAUSES:
        return f"cause {data['cause']!r} is not one of {', '.join(CAUSES)}"
    return None


_JSON_NAMES = {str: "text", int: "an integer", type(None): "null"}

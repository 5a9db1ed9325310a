"""A checkpoint's validity record, `elxpk_digest.json`, written once orbax has committed the step.

It holds the config fingerprint, each file's size (from the listing: no file is read) and the on-device
fingerprint of every array of the state (trainer.ckpt.fingerprint), computed from the arrays themselves at
save time. Orbax restores a flipped byte silently and keeps no checksum of array data, so a step is
restorable only if:
- its record exists (the save was committed and seen to finish: the commit marker) and has the right shape;
- its files are the ones listed, at the listed sizes (a truncated or missing file is caught without
  reading a byte);
- after restore, the restored arrays fingerprint as saved (trainer/ckpt/checkpoint.py): any changed element
  is caught.
So a save reads nothing back and a restore reads each byte once, through orbax.

Every file operation goes through `etils.epath`, as orbax's own do, so a step directory may be local or
on an object store (`gs://...`).
"""

from __future__ import annotations

import json
from typing import Any

from etils import epath

from elxpk_contract.transient import UnconfirmedAbsence, is_absence, transient_cause
from elxpk_storage.checkpoint_files import DIGEST_FILE, LinkInStep, files_under, is_object_store, read_bounded
from elxpk_storage.checkpoint_files import present as exists_strict

_VERSION = 2
MAX_DIGEST_BYTES = 64 << 20  # a digest lists one size per file and 16 hex digits per array: far below this
_HEX = frozenset("0123456789abcdef")


def _files(step_dir: epath.Path) -> dict[str, epath.Path]:
    return {rel: path for rel, path in files_under(step_dir).items()
            if rel != DIGEST_FILE and not rel.endswith(".tmp")}


def write_digest(step_dir: epath.PathLike, step: int, fingerprint: str, arrays: dict[str, str]) -> None:
    """Write the record of a committed step: `fingerprint` is the config's, `arrays` the state's
    (trainer.ckpt.fingerprint.fingerprint)."""
    step_dir = epath.Path(step_dir)
    body = {
        "version": _VERSION,
        "step": step,
        "fingerprint": fingerprint,
        "files": {rel: path.stat().length for rel, path in sorted(_files(step_dir).items())},
        "arrays": dict(sorted(arrays.items())),
    }
    text = json.dumps(body, indent=1, sort_keys=True)
    if is_object_store(step_dir):
        # An object becomes visible whole when its upload finishes, so a direct write is already
        # all-or-nothing; a rename there would be a copy plus a delete.
        (step_dir / DIGEST_FILE).write_text(text, encoding="utf-8")
        return
    tmp = step_dir / (DIGEST_FILE + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(step_dir / DIGEST_FILE)  # the record appears whole or not at all


def read_digest(step_dir: epath.PathLike) -> dict | None:
    """The record, or None when it is missing, unreadable or not of the shape write_digest writes. A read
    that failed for a transient cause (elxpk_contract.transient: storage unavailable, access denied, out of
    memory) raises: it says nothing about the record."""
    try:
        record = _load(epath.Path(step_dir))
    except (OSError, ValueError) as exc:
        if transient_cause(exc) is not None:
            raise
        return None
    return record if shape_problem(record) is None else None


def _load(step_dir: epath.Path) -> Any:
    """The decoded digest file, read through no link and never more than MAX_DIGEST_BYTES (ValueError)."""
    data = read_bounded(step_dir / DIGEST_FILE, MAX_DIGEST_BYTES)
    if len(data) > MAX_DIGEST_BYTES:
        raise ValueError(f"over {MAX_DIGEST_BYTES} bytes")
    return json.loads(data.decode("utf-8"))


def shape_problem(record: object) -> str | None:
    """Why `record` is not a digest as write_digest writes it (valid JSON can still be anything)."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    kinds = {"version": int, "step": int, "fingerprint": str, "files": dict, "arrays": dict}
    for key, kind in kinds.items():
        if not isinstance(record.get(key), kind) or isinstance(record.get(key), bool):
            return f"{key!r} is {record.get(key)!r:.60}, not a {kind.__name__}"
    for rel, size in record["files"].items():
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            return f"files[{rel!r}] is {size!r:.60}, not a byte count"
    for name, value in record["arrays"].items():
        if not (isinstance(value, str) and len(value) == 16 and set(value) <= _HEX):
            return f"arrays[{name!r}] is {value!r:.60}, not a 16-digit hex fingerprint"
    return None


def verify(step_dir: epath.PathLike, step: int) -> str | None:
    """None if the step directory holds a committed record for `step` and exactly the files it lists, at
    their sizes; else the reason. Reads the record only: the arrays are checked after restore. A step that is,
    or holds, a symbolic link is never restored: nothing below it is read, and no walk follows it."""
    return checked(step_dir, step)[1]


def checked(step_dir: epath.PathLike, step: int) -> tuple[dict | None, str | None]:
    """(the record, None) when `verify` passes the step, else (None, the reason): the record the check read,
    so that a restore reads it once.

    Only content is a reason. A listing, stat or read that failed for a transient cause
    (elxpk_contract.transient) raises instead: an outage must never make a whole step look torn. A file is
    missing only when two listings agree: one listing or one read that answers "not found" while the file
    is there (an object store's front end does) is checked again; a file that a listing shows but a read
    or stat calls missing raises UnconfirmedAbsence (transient: the restore retries the step)."""
    step_dir = epath.Path(step_dir)
    record, reason, absent = _check_once(step_dir, step)
    if absent:  # a fresh listing must agree before a file counts as missing
        record, reason, absent = _check_once(step_dir, step)
    return record, reason


def confirm_absence(step_dir: epath.PathLike, step: int, error: BaseException) -> str:
    """The content reason behind a read of the step that answered "not found" (`error`, e.g. orbax's read
    of state/_METADATA), from a fresh listing; UnconfirmedAbsence (transient) from `error` when the listing
    still shows every file the digest lists: one answer is not the file's absence."""
    reason = verify(step_dir, step)
    if reason is None:
        said = (str(error).splitlines() or [type(error).__name__])[0][:200]
        raise UnconfirmedAbsence(f"a read of step {step} ({said})") from error
    return reason


def _check_once(step_dir: epath.Path, step: int) -> tuple[dict | None, str | None, bool]:
    """(record, reason, whether the reason is a file's absence, which a second listing must confirm)."""
    try:
        present = _files(step_dir)  # one walk, before anything is read
    except LinkInStep as exc:
        return None, str(exc), False
    except FileNotFoundError:
        present = {}
    try:
        record = _load(step_dir)
    except (OSError, ValueError) as exc:
        if transient_cause(exc) is not None:
            raise
        if not exists_strict(step_dir / DIGEST_FILE):
            return None, "no digest: the save was not seen to commit (interrupted, or the digest marker was removed)", True
        if is_absence(exc):  # listed, yet its read answered "not found"
            raise UnconfirmedAbsence(f"{step_dir.name}/{DIGEST_FILE}") from exc
        return None, "digest file unreadable", False
    problem = shape_problem(record)
    if problem is not None:
        return None, f"digest file has the wrong shape: {problem}", False
    if record["version"] != _VERSION or record["step"] != step:
        return None, f"digest belongs to step {record['step']!r} (version {record['version']}), not {step}", False
    expected: dict = record["files"]
    for rel in sorted(expected):
        if rel not in present:
            return None, f"file missing: {rel}", True
        try:
            size = present[rel].stat().length
        except FileNotFoundError as exc:  # the listing shows it: one answer, not its absence
            raise UnconfirmedAbsence(f"{step_dir.name}/{rel}") from exc
        if size != expected[rel]:
            return None, f"file changed: {rel} ({size} bytes, {expected[rel]} when committed)", False
    extra = sorted(set(present) - set(expected))
    if extra:
        return None, f"unexpected file: {extra[0]}", False
    return record, None, False

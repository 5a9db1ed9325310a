"""A checkpoint's validity proof: sha256 of every file in its step directory, written after commit.

Orbax restores a flipped byte silently and has no checksum of array data, so a step is restorable only
if its digest file exists (the save was committed and seen to finish) and every file still matches it.

Every file operation goes through `etils.epath`, as orbax's own do, so a step directory may be local or
on an object store (`gs://...`).
"""

from __future__ import annotations

import hashlib
import json

from etils import epath

from trainer.ckpt_storage import files_under, is_object_store

DIGEST_FILE = "elxpk_digest.json"
_VERSION = 1


def _sha256(path: epath.Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files(step_dir: epath.Path) -> dict[str, epath.Path]:
    return {rel: path for rel, path in files_under(step_dir).items()
            if rel != DIGEST_FILE and not rel.endswith(".tmp")}


def write_digest(step_dir: epath.PathLike, step: int, fingerprint: str) -> None:
    step_dir = epath.Path(step_dir)
    body = {
        "version": _VERSION,
        "step": step,
        "fingerprint": fingerprint,
        "files": {rel: _sha256(path) for rel, path in sorted(_files(step_dir).items())},
    }
    text = json.dumps(body, indent=1, sort_keys=True)
    if is_object_store(step_dir):
        # An object becomes visible whole when its upload finishes, so a direct write is already
        # all-or-nothing; a rename there would be a copy plus a delete.
        (step_dir / DIGEST_FILE).write_text(text, encoding="utf-8")
        return
    tmp = step_dir / (DIGEST_FILE + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(step_dir / DIGEST_FILE)  # the digest appears whole or not at all


def read_digest(step_dir: epath.PathLike) -> dict | None:
    """The digest record, or None when it is missing, unreadable or not of the shape write_digest writes."""
    try:
        record = json.loads((epath.Path(step_dir) / DIGEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if shape_problem(record) is None else None


def shape_problem(record: object) -> str | None:
    """Why `record` is not a digest as write_digest writes it (valid JSON can still be anything)."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    kinds = {"version": int, "step": int, "fingerprint": str, "files": dict}
    for key, kind in kinds.items():
        if not isinstance(record.get(key), kind) or isinstance(record.get(key), bool):
            return f"{key!r} is {record.get(key)!r:.60}, not a {kind.__name__}"
    for rel, sha in record["files"].items():
        if not (isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)):
            return f"files[{rel!r}] is {sha!r:.60}, not a sha256 hex digest"
    return None


def verify(step_dir: epath.PathLike, step: int) -> str | None:
    """None if the step directory matches its digest, else the reason it does not."""
    step_dir = epath.Path(step_dir)
    try:
        record = json.loads((step_dir / DIGEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        if not (step_dir / DIGEST_FILE).exists():
            return "no digest: the save was not seen to commit (interrupted, or the digest marker was removed)"
        return "digest file unreadable"
    problem = shape_problem(record)
    if problem is not None:
        return f"digest file has the wrong shape: {problem}"
    if record["version"] != _VERSION or record["step"] != step:
        return f"digest belongs to step {record['step']!r} (version {record['version']}), not {step}"
    expected: dict = record["files"]
    present = _files(step_dir)
    for rel in sorted(expected):
        if rel not in present:
            return f"file missing: {rel}"
        if _sha256(present[rel]) != expected[rel]:
            size = present[rel].stat().length
            return f"file changed: {rel} (sha256 mismatch, {size} bytes now)"
    extra = sorted(set(present) - set(expected))
    if extra:
        return f"unexpected file: {extra[0]}"
    return None

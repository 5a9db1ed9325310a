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
    try:
        return json.loads((epath.Path(step_dir) / DIGEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def verify(step_dir: epath.PathLike, step: int) -> str | None:
    """None if the step directory matches its digest, else the reason it does not."""
    step_dir = epath.Path(step_dir)
    digest = read_digest(step_dir)
    if digest is None:
        if (step_dir / DIGEST_FILE).exists():
            return "digest file unreadable"
        return "no digest: the save was not seen to commit (interrupted, or the digest marker was removed)"
    if digest.get("version") != _VERSION or digest.get("step") != step:
        return f"digest belongs to step {digest.get('step')!r}, not {step}"
    expected: dict = digest.get("files", {})
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

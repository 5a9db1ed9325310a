"""A checkpoint's validity proof: sha256 of every file in its step directory, written after commit.

Orbax restores a flipped byte silently and has no checksum of array data, so a step is restorable only
if its digest file exists (the save was committed and seen to finish) and every file still matches it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

DIGEST_FILE = "elxpk_digest.json"
_VERSION = 1


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files(step_dir: Path) -> dict[str, Path]:
    found = {}
    for root, _, names in os.walk(step_dir):
        for name in names:
            path = Path(root) / name
            rel = path.relative_to(step_dir).as_posix()
            if rel != DIGEST_FILE and not rel.endswith(".tmp"):
                found[rel] = path
    return found


def write_digest(step_dir: Path, step: int, fingerprint: str) -> None:
    body = {
        "version": _VERSION,
        "step": step,
        "fingerprint": fingerprint,
        "files": {rel: _sha256(path) for rel, path in sorted(_files(step_dir).items())},
    }
    tmp = step_dir / (DIGEST_FILE + ".tmp")
    tmp.write_text(json.dumps(body, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, step_dir / DIGEST_FILE)  # the digest appears whole or not at all


def read_digest(step_dir: Path) -> dict | None:
    try:
        return json.loads((step_dir / DIGEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def verify(step_dir: Path, step: int) -> str | None:
    """None if the step directory matches its digest, else the reason it does not."""
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
            size = present[rel].stat().st_size
            return f"file changed: {rel} (sha256 mismatch, {size} bytes now)"
    extra = sorted(set(present) - set(expected))
    if extra:
        return f"unexpected file: {extra[0]}"
    return None

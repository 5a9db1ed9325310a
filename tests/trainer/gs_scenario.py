"""Run in a fresh interpreter by test_object_store.py: the trainer's checkpoint file operations on gs://.

argv[1]: a local checkpoint directory written by a real run. Prints one JSON object of observations.
"""

from __future__ import annotations

import json
import sys

from tests.trainer import fake_gcs

fake_gcs.install()

from etils import epath  # noqa: E402  (after the fake is registered, before epath caches a filesystem)

from elxpk_storage import checkpoint_files as ckpt_storage  # noqa: E402
from elxpk_storage import digest  # noqa: E402

URL = "gs://bucket/run/ckpt"


def main(local_dir: str) -> dict:
    local = epath.Path(local_dir)
    root = ckpt_storage.checkpoint_root(URL)
    backend = root._backend  # noqa: SLF001 - which backend epath chose is the point here
    out: dict = {"root": str(root), "backend": type(backend).__name__,
                 "listings_cache": backend.fs(str(root)).storage_options.get("use_listings_cache")}
    steps = sorted(int(p.name) for p in local.iterdir() if p.name.isdigit())
    out["steps"] = steps
    # Upload the committed steps as they are (orbax writes its commit marker locally too).
    for step in steps:
        for rel, path in ckpt_storage.files_under(local / str(step)).items():
            path.copy(root / str(step) / rel)
    out["markers"] = [(root / str(s) / ckpt_storage.COMMIT_MARKER).exists() for s in steps]
    out["verify_uploaded"] = {s: digest.verify(root / str(s), s) for s in steps}
    newest = steps[-1]
    local_digest = (local / str(newest) / digest.DIGEST_FILE).read_text(encoding="utf-8")
    record = digest.read_digest(local / str(newest))
    digest.write_digest(root / str(newest), newest, record["fingerprint"], record["arrays"])
    out["digest_identical"] = (root / str(newest) / digest.DIGEST_FILE).read_text(encoding="utf-8") == local_digest
    out["digest_tmp_left"] = [rel for rel in ckpt_storage.files_under(root / str(newest)) if rel.endswith(".tmp")]

    # Saves that never committed: a step without orbax's marker, and a tmp directory.
    (root / "20" / "state" / "x").write_text("partial", encoding="utf-8")
    (root / f"24{ckpt_storage.TMP_SUFFIX}" / "x").write_text("partial", encoding="utf-8")
    leftovers = ckpt_storage.uncommitted(root)
    out["uncommitted_fresh"] = ckpt_storage.uncommitted(root.parent / "fresh-run")  # no object there yet
    out["uncommitted"] = [[str(p), s] for p, s in leftovers]
    for path, _ in leftovers:
        ckpt_storage.remove_tree(path, ignore_errors=True)
    out["after_cleanup"] = sorted(p.name for p in root.iterdir())

    # A truncated file is caught from the listing alone, and the step is moved aside by copy + delete.
    files = ckpt_storage.files_under(root / str(newest))
    rel, victim = max(((r, p) for r, p in files.items() if r.startswith("state/")), key=lambda rp: rp[1].stat().length)
    data = bytearray(victim.read_bytes())
    victim.write_bytes(bytes(data[: len(data) // 2]))
    reason = digest.verify(root / str(newest), newest)
    out["corrupt_reason"] = reason
    target = ckpt_storage.quarantine(root, newest, reason, now_ms=1234)
    out["quarantine_target"] = str(target)
    out["quarantine_files"] = sorted(ckpt_storage.files_under(target))
    out["source_files"] = sorted(files)
    out["source_exists"] = (root / str(newest)).exists()
    out["skip_reason"] = (target / ckpt_storage.SKIP_REASON_FILE).read_text(encoding="utf-8")
    out["steps_after"] = sorted(p.name for p in root.iterdir())
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))

"""Run in a fresh interpreter by test_checkpoint_inspect.py: `elxpk checkpoint inspect` on a gs:// directory.

argv[1]: a local checkpoint directory holding steps written by orbax and one killed save
(`<step>.orbax-checkpoint-tmp`); argv[2:]: step numbers made bare prefixes (empty folders) after the upload. It is uploaded to gs://bucket/run/checkpoints as orbax lays a step out on
an object store: a committed step as it is, the killed save as `<step>/` in place without orbax's commit
marker (on gs:// orbax writes the step where it stays and marks it committed last). The CLI's own `main`
then runs here, three times (inspect, --quarantine, inspect), because the in-memory bucket of
tests/trainer/fake_gcs.py lives in this process. Prints one JSON object: each run's exit code and stdout,
and the bucket's names afterwards.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

from tests.trainer import fake_gcs

fake_gcs.install()

from etils import epath  # noqa: E402  (after the fake is registered, before epath caches a filesystem)

from elxpk.checkpoints.inspection import TMP_STEP  # noqa: E402
from elxpk.cli.main import main  # noqa: E402
from elxpk_storage import checkpoint_files as ckpt_storage  # noqa: E402

URL = "gs://bucket/run/checkpoints"


def upload(local: epath.Path, root: epath.Path) -> None:
    for entry in local.iterdir():
        tmp = TMP_STEP.match(entry.name)
        name = tmp.group(1) if tmp else entry.name
        for rel, path in ckpt_storage.files_under(entry).items():
            if tmp and rel.rsplit("/", 1)[-1] == ckpt_storage.COMMIT_MARKER:
                continue
            path.copy(root / name / rel.replace(ckpt_storage.TMP_SUFFIX, ""))


def run(args: list[str]) -> dict:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return {"code": code, "out": out.getvalue(), "err": err.getvalue()}


if __name__ == "__main__":
    root = ckpt_storage.checkpoint_root(URL)
    upload(epath.Path(sys.argv[1]), root)
    for bare in sys.argv[2:]:  # `STEP`: a bare prefix, as a save killed before its first write leaves it
        (root / bare).mkdir()
    runs = [run(["checkpoint", "inspect", URL, "-o", "json"]),
            run(["checkpoint", "inspect", URL, "--quarantine", "-o", "json"]),
            run(["checkpoint", "inspect", URL, "-o", "json"])]
    quarantined = root / "elxpk-quarantine"
    print(json.dumps({"runs": runs, "names": sorted(p.name for p in root.iterdir()),
                      "quarantine": sorted(ckpt_storage.files_under(quarantined)) if quarantined.exists() else []}))

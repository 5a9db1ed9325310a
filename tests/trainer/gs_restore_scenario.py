"""Run in a fresh interpreter by test_restore_answers.py: restores of a real run's checkpoints from `gs://`,
through gcsfs and tensorstore, against tests/support/fake_gcs.py, each case with one answer injected.

argv[1]: a local checkpoint directory written by a real run; argv[2]: a JSON list of cases, each
{"name": ..., "faults": {"read NAME" | "stat NAME": [status, ...]}, "delete": [object names]} with names
relative to the checkpoint directory. Prints one JSON object: per case, the restored step, the steps set
aside with their reasons, how often each faulted object was asked for, the injected answers left unserved,
and the objects under the quarantine.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from tests.support.clock import ManualClock
from tests.support.fake_gcs import FakeGcs

BUCKET, PREFIX = "restore-answers", "run/ckpt"


class Recorder:
    def __init__(self) -> None:
        self.skipped: list = []

    def event(self, name: str, step: int, **details: object) -> None:
        self.skipped.append([step, details.get("reason")])


def main(local: Path, cases: list[dict]) -> dict:
    fake = FakeGcs().start()
    os.environ.update({"STORAGE_EMULATOR_HOST": fake.url, "TENSORSTORE_GCS_HTTP_URL": fake.url,
                       "GOOGLE_AUTH_TOKEN_FOR_TESTING": "anon"})
    import jax

    from tests.support.runs import tiny_config
    from trainer.ckpt.checkpoint import CheckpointStore
    from trainer.core import mesh as meshlib
    from trainer.core import state as core_state

    cfg = tiny_config(local.parent / "run", checkpoint_dir=f"gs://{BUCKET}/{PREFIX}")
    devices = jax.devices()
    mesh = meshlib.build_mesh({0: devices[:2], 1: devices[2:4]}, [0, 1])
    out = {}
    for case in cases:
        began = time.monotonic()
        with fake.lock:
            fake.objects.clear()
            fake.log.clear()
            for path in local.rglob("*"):
                if path.is_file():
                    fake.objects[(BUCKET, f"{PREFIX}/{path.relative_to(local).as_posix()}")] = (path.read_bytes(), 1)
            for name in case.get("delete", []):
                del fake.objects[(BUCKET, f"{PREFIX}/{name}")]
            fake.object_faults = {f"{k.split(' ', 1)[0]} {PREFIX}/{k.split(' ', 1)[1]}": list(v)
                                  for k, v in case["faults"].items()}
        recorder = Recorder()
        clock = ManualClock()  # the trainer's backoff between tries is counted, not waited
        skipped = recorder.skipped
        try:
            store = CheckpointStore(cfg, fault_hook=lambda point, step: None, recorder=recorder, clock=clock)
            try:
                restored = store.restore_latest(core_state.state_target(cfg, mesh))
            finally:
                store.close(raise_errors=False)
            result: object = restored[0] if restored else None
        except Exception as exc:  # noqa: BLE001 - reported to the test, which names what it expected
            result = f"{type(exc).__name__}: {exc}"[:300]
        with fake.lock:
            asked = {k: sum(1 for line in fake.log if line == k) for k in fake.object_faults}
            out[case["name"]] = {"restored": result, "skipped": skipped, "asked": asked,
                                 "unserved": {k: v for k, v in fake.object_faults.items() if v},
                                 "quarantined": sorted(n for _, n in fake.objects if "elxpk-quarantine" in n),
                                 "seconds": round(time.monotonic() - began, 1), "slept": clock.slept}
    fake.stop()
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), json.loads(sys.argv[2]))))

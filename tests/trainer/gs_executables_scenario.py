"""Run in a fresh interpreter by test_executable_store.py: the executable store on gs:// through the real
clients (epath and gcsfs) against the repo's Cloud Storage endpoint (tests/support/fake_gcs.py), with the
run's real step on CPU devices. Prints one JSON object.

It ran against an in-memory fsspec filesystem once, whose files are BytesIO: `readline(limit)` worked
there and failed on gcsfs's file, so on the test cluster every entry on the bucket was unreadable."""

from __future__ import annotations

import json
import os

from tests.support.fake_gcs import FakeGcs
from tests.support.runs import tiny_config
from trainer.clock import SystemClock

BUCKET, PREFIX = "bucket", "run"


def _get(cfg, mesh, store: str) -> dict:
    from trainer.core import step as steplib
    from trainer.core.executable_store import ExecutableStore

    steplib._EXECUTABLES.clear()  # a new process: nothing compiled in memory  # noqa: SLF001
    compiled, _ = steplib.StepCache(cfg, SystemClock(), store=ExecutableStore(store)).get(mesh)
    return {"how": compiled.how, "store": compiled.store}


def main() -> dict:
    fake = FakeGcs().start()
    fake.buckets.add(BUCKET)
    os.environ.update({"STORAGE_EMULATOR_HOST": fake.url, "TENSORSTORE_GCS_HTTP_URL": fake.url,
                       "GOOGLE_AUTH_TOKEN_FOR_TESTING": "anon"})
    import jax

    from trainer.core import mesh as meshlib
    from trainer.core.executable_store import store_dir

    store = store_dir(None, f"gs://{BUCKET}/{PREFIX}/checkpoints")
    devices = jax.devices()
    mesh = meshlib.build_mesh({0: devices[:2], 1: devices[2:4]}, [0, 1])
    cfg = tiny_config("unused", seed=13)
    out: dict = {"store": store, "first": _get(cfg, mesh, store)}
    with fake.lock:
        out["objects"] = sorted(name for bucket, name in fake.objects if bucket == BUCKET)
    out["second"] = _get(cfg, mesh, store)
    (entry,) = out["objects"]
    data, _ = fake.objects[(BUCKET, entry)]
    with fake.lock:
        fake.objects[(BUCKET, entry)] = (data[:-1] + bytes([data[-1] ^ 1]), fake.generation + 1)  # a byte altered
    out["altered"] = _get(cfg, mesh, store)
    with fake.lock:  # half an object: what a bucket never shows, but a copy might
        fake.objects[(BUCKET, entry)] = (data[: len(data) // 2], fake.generation + 2)
    out["truncated"] = _get(cfg, mesh, store)
    fake.stop()
    return out


if __name__ == "__main__":
    print(json.dumps(main()))

"""Run in a fresh interpreter by test_executable_store.py: the executable store on gs:// (an in-memory stand-in
for the bucket, tests/trainer/fake_gcs.py), with the run's real step on CPU devices. Prints one JSON object."""

from __future__ import annotations

import json

from tests.trainer import fake_gcs

fake_gcs.install()

import fsspec  # noqa: E402  (after the fake is registered)

from tests.support.runs import tiny_config  # noqa: E402
from trainer.clock import SystemClock  # noqa: E402
from trainer.core import step as steplib  # noqa: E402
from trainer.core.executable_store import ExecutableStore, store_dir  # noqa: E402

STORE = store_dir(None, "gs://bucket/run/checkpoints")


def _get(cfg, mesh) -> dict:
    steplib._EXECUTABLES.clear()  # a new process: nothing compiled in memory  # noqa: SLF001
    compiled, _ = steplib.StepCache(cfg, SystemClock(), store=ExecutableStore(STORE)).get(mesh)
    return {"how": compiled.how, "store": compiled.store}


def main() -> dict:
    import jax

    from trainer.core import mesh as meshlib

    devices = jax.devices()
    mesh = meshlib.build_mesh({0: devices[:2], 1: devices[2:4]}, [0, 1])
    cfg = tiny_config("unused", seed=13)
    fs = fsspec.filesystem("gs")
    out: dict = {"store": STORE, "first": _get(cfg, mesh)}
    out["objects"] = sorted(fs.ls(STORE, detail=False))
    out["second"] = _get(cfg, mesh)
    (entry,) = out["objects"]
    data = fs.cat_file(entry)
    fs.pipe_file(entry, data[:-1] + bytes([data[-1] ^ 1]))  # one payload byte altered
    out["altered"] = _get(cfg, mesh)
    fs.pipe_file(entry, data[: len(data) // 2])  # half an object: what a bucket never shows, but a copy might
    out["truncated"] = _get(cfg, mesh)
    return out


if __name__ == "__main__":
    print(json.dumps(main()))

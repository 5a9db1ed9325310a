"""A step compiled in a jax.distributed group, even a group of one, is never loaded outside one: its
collectives are compiled for the group's runtime, and loaded by a simulated run on the same devices it ran
and differed in the last bits (a bitwise resize failed in CI once a one-process multi-controller run had
written its entry into the tests' shared store). Two real processes share one store here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = """
import socket, sys
from tests.support.runs import tiny_config
from trainer.elastic.loop import train
backend = sys.argv[1]
extra = {}
if backend == "multi-controller":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        extra = {"num_processes": 1, "coordinator": f"127.0.0.1:{s.getsockname()[1]}"}
train(tiny_config(sys.argv[2], steps=2, checkpoint_period=2, num_slices=1, slice_backend=backend, **extra))
"""


def _made(backend: str, run: Path, cache: Path) -> str:
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(cache)}  # the store is its sibling, shared
    done = subprocess.run([sys.executable, "-c", RUN, backend, str(run)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    (made,) = [e["executable"] for e in events if e["event"] == "restore_done"]
    return made


def test_a_distributed_processs_step_is_not_loaded_by_a_process_outside_a_group(tmp_path):
    cache = tmp_path / "jax-cache"
    assert _made("multi-controller", tmp_path / "group", cache) == "compiled"
    assert any((tmp_path / "jax-cache-executables").glob("*.xexec"))  # the group's entry is there to be found
    assert _made("simulated", tmp_path / "alone", cache) != "deserialized"

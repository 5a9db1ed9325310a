"""The tests' shared XLA compilation cache (tests/support/xla_cache.py): on the CPU a second process loads
every executable the first compiled, and trains bitwise the same as the process that compiled them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.xla_cache import xla_cache_env

ROOT = Path(__file__).resolve().parents[1]

# One tiny trainer run (tests/support/runs.py) in a fresh interpreter, counting jax's own cache-hit events.
PROBE = """
import json, sys
from pathlib import Path
import jax.monitoring
hits = []
jax.monitoring.register_event_listener(
    lambda event, **_: hits.append(event) if event == "/jax/compilation_cache/cache_hits" else None)
from tests.support.runs import read_jsonl, tiny_config
from trainer.elastic.loop import train
cfg = tiny_config(sys.argv[1], steps=3, checkpoint_period=2)
train(cfg)
losses = [m["loss"] for m in read_jsonl(Path(cfg.run_dir) / "metrics.jsonl")]
print(json.dumps({"hits": len(hits), "losses": losses}))
"""


def _run(tmp_path: Path, name: str, cache: Path) -> dict:
    env = {**os.environ, **xla_cache_env(), "JAX_COMPILATION_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / name)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_hits_the_cache_and_trains_bitwise_the_same(tmp_path):
    cache = tmp_path / "xla"
    cold = _run(tmp_path, "cold", cache)
    assert cold["hits"] == 0 and len(cold["losses"]) == 3
    entries = list(cache.glob("*-cache"))
    assert entries, "every compile is written, however short"
    warm = _run(tmp_path, "warm", cache)
    assert warm["hits"] >= len(entries)  # each executable the cold run compiled, loaded
    assert warm["losses"] == cold["losses"]  # hex floats: bitwise


def test_this_session_and_its_subprocesses_use_the_cache():
    # tests/conftest.py sets the variables before jax is imported, so this process's jax took them too.
    import jax
    from jax._src import compilation_cache

    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == jax.config.jax_compilation_cache_dir
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0
    assert compilation_cache.is_cache_used(jax.devices()[0].client)

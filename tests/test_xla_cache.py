"""The tests' shared XLA compilation cache (tests/support/xla_cache.py): on the CPU a second process loads
every executable the first compiled, and trains bitwise the same as the process that compiled them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.xla_cache import SITE, xla_cache_env

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
    # Each executable the cold run compiled, loaded: from jax's cache, but the train step from the executable
    # store beside it (issue 49), which deserializes it without asking jax's cache.
    restored = [json.loads(line) for line in (tmp_path / "warm" / "events.jsonl").read_text().splitlines()
                if '"restore_done"' in line]
    stored = sum(e.get("executable") == "deserialized" for e in restored)
    assert warm["hits"] + stored >= len(entries)
    assert warm["losses"] == cold["losses"]  # hex floats: bitwise


def test_this_session_and_its_subprocesses_use_the_cache():
    # tests/conftest.py sets the variables before jax is imported, so this process's jax took them too.
    import jax
    from jax._src import compilation_cache

    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == jax.config.jax_compilation_cache_dir
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0
    assert compilation_cache.is_cache_used(jax.devices()[0].client)


# A process that jax.distributed calls process 1 compiles one small function (tests/support/xla_site/).
AS_PROCESS_1 = """
from jax._src import distributed
distributed.global_state.process_id = 1  # what jax.distributed.initialize sets in a group's second process
import jax, jax.numpy as jnp
jax.jit(lambda x: x * 3 + 1)(jnp.arange(5)).block_until_ready()
from jax._src import lru_cache
print("sums first:", getattr(lru_cache.LRUCache._evict_if_needed, "_sums_first", False))
"""


def _entries_written_as_process_1(tmp_path: Path, name: str, pythonpath: str) -> tuple[list[Path], str]:
    cache = tmp_path / name
    env = {**os.environ, **xla_cache_env(), "JAX_COMPILATION_CACHE_DIR": str(cache), "PYTHONPATH": pythonpath}
    done = subprocess.run([sys.executable, "-c", AS_PROCESS_1], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return list(cache.glob("*-cache")), done.stdout.strip()


def test_every_process_of_a_group_writes_its_compiles(tmp_path):
    """jax writes from process 0 only; the tests' environment (PYTHONPATH's site folder) lets process 1 write
    too, whose key differs on CPU devices. Without the folder nothing is written: the control."""
    alone, alone_says = _entries_written_as_process_1(tmp_path, "jax-alone", str(ROOT))
    written, site_says = _entries_written_as_process_1(tmp_path, "with-site", xla_cache_env()["PYTHONPATH"])
    assert not alone and written
    assert (alone_says, site_says) == ("sums first: False", "sums first: True")  # the cheap writes take too
    assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == str(SITE)  # conftest put it first, for subprocesses


def test_a_write_within_the_cap_walks_nothing_and_one_past_it_evicts_the_least_recently_used(tmp_path):
    """The cache's writes, summed by os.scandir first (tests/support/xla_site/): jax's eviction is unchanged."""
    from jax._src import lru_cache

    assert getattr(lru_cache.LRUCache._evict_if_needed, "_sums_first", False)  # conftest's import took here
    cache = lru_cache.LRUCache(str(tmp_path), max_size=3000)
    for key in ("a", "b", "c"):
        cache.put(key, bytes(1000))
    assert sorted(p.name for p in tmp_path.glob("*-cache")) == ["a-cache", "b-cache", "c-cache"]  # at the cap
    assert cache.get("a") == bytes(1000)  # now the most recently used
    cache.put("d", bytes(1000))
    assert sorted(p.name for p in tmp_path.glob("*-cache")) == ["a-cache", "c-cache", "d-cache"]  # b went

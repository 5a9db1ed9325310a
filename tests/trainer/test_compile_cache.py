"""The run's persistent compilation cache (elxpk_contract/compile_cache.py, trainer/compile_cache.py): on by
default beside the checkpoints, where a restart finds it; a corrupt entry is compiled again, never a failure;
a cache that cannot be used is one warning line. `python -m trainer` as the user runs it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elxpk_contract.compile_cache import CACHE_NAME, cache_dir, default_cache_dir
from elxpk_contract.step_names import step_number
from tests.support.runs import read_jsonl

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--steps", "4", "--checkpoint-period", "4", "--seed", "7", "--global-batch", "8", "--seq-len", "16",
        "--vocab-size", "64", "--d-model", "32", "--n-layers", "2", "--n-heads", "2", "--d-ff", "64",
        "--recovery", "checkpoint"]
CORRUPT_READ = "Error reading persistent compilation cache entry"


@pytest.mark.parametrize(("checkpoints", "cache"), [
    ("elxpk-run/checkpoints", "elxpk-run/xla-cache"),
    ("/data/run/checkpoints/", "/data/run/xla-cache"),
    ("gs://b/run/checkpoints", "gs://b/run/xla-cache"),
    ("gs://b", "gs://b/xla-cache"),  # a bucket's root has no sibling: inside, under a name no step has
    ("gs://b/ckpt", "gs://b/xla-cache"),
    ("checkpoints", "xla-cache"),
])
def test_the_default_is_the_checkpoint_directorys_sibling(checkpoints, cache):
    assert default_cache_dir(checkpoints) == cache
    assert cache_dir(None, checkpoints) == cache
    assert cache_dir("off", checkpoints) is None
    assert cache_dir("gs://c/x", checkpoints) == "gs://c/x"


_PART = st.text(st.sampled_from("abc019-_."), min_size=1, max_size=6).filter(lambda s: s not in (".", ".."))


@given(scheme=st.sampled_from(["", "/", "gs://"]), parts=st.lists(_PART, min_size=1, max_size=4),
       slash=st.booleans())
def test_the_cache_is_never_the_checkpoint_directory_nor_a_step_in_it(scheme, parts, slash):
    checkpoints = scheme + "/".join(parts) + ("/" if slash else "")
    cache = default_cache_dir(checkpoints)
    assert cache.rstrip("/") != checkpoints.rstrip("/")
    assert cache.endswith("/" + CACHE_NAME) or cache == CACHE_NAME
    assert step_number(CACHE_NAME) is None  # where it lands inside (a bucket's root), listings pass over it
    parent = cache[: -len(CACHE_NAME)].rstrip("/")
    assert checkpoints.rstrip("/").startswith(parent)  # beside it or inside it, in the same bucket


def _start(run_dir: Path, *flags: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # the trainer sets its own devices
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # as in a pod: no cache chosen by the caller; the run's decides
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # a tiny step compiles in well under jax's 1 s
    return subprocess.Popen([sys.executable, "-m", "trainer", "--run-dir", str(run_dir), *TINY, *flags], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _trainer(run_dir: Path, *flags: str) -> subprocess.CompletedProcess:
    proc = _start(run_dir, *flags)
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _losses(run_dir: Path) -> list[str]:
    return [m["loss"] for m in read_jsonl(run_dir / "metrics.jsonl")]


@pytest.mark.slow
def test_a_restart_reads_the_cache_beside_the_checkpoints_and_a_corrupt_entry_is_compiled_again(tmp_path):
    """Two runs start at once on one empty cache (each its own jax process 0, so both write every key, as
    no two hosts of a slice do), then a restart finds every entry corrupt."""
    cache = tmp_path / "run" / CACHE_NAME
    both = [_start(tmp_path / "run"), _start(tmp_path / "beside", "--compilation-cache-dir", str(cache))]
    for proc in both:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    assert _losses(tmp_path / "beside") == _losses(tmp_path / "run")
    entries = sorted(cache.glob("*-cache"))
    assert entries, "the run wrote its compiles beside its checkpoints"
    assert not any("cache" in p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    for i, entry in enumerate(entries):  # every entry: garbage, truncated, or another entry's bytes
        entry.write_bytes(os.urandom(64) if i % 3 == 0 else entries[(i + 1) % len(entries)].read_bytes()[:17]
                          if i % 3 == 1 else b"")
    again = _trainer(tmp_path / "again", "--compilation-cache-dir", str(cache))
    assert again.returncode == 0, again.stderr[-3000:]
    assert CORRUPT_READ in again.stderr  # it did read them, and compiled instead
    assert _losses(tmp_path / "again") == _losses(tmp_path / "run")  # hex floats: bitwise


@pytest.mark.slow
def test_a_cache_that_cannot_be_used_is_one_warning_and_the_run_goes_on(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache should be\n")
    done = _trainer(tmp_path / "run", "--compilation-cache-dir", str(blocker / "cache"), "--steps", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: --compilation-cache-dir")]
    assert len(warnings) == 1 and "every compile of this run starts from scratch" in warnings[0]
    assert not (tmp_path / "run" / CACHE_NAME).exists()


@pytest.mark.slow
def test_a_cache_at_another_path_still_hits(tmp_path):
    """jax's default keys every compile on the cache's own path (its GPU autotune cache directory rides in the
    debug options): a copied or moved run directory missed every entry. trainer/compile_cache.py turns that off."""
    import shutil

    first = _trainer(tmp_path / "first", "--compilation-cache-dir", str(tmp_path / "cache-a"), "--steps", "1")
    assert first.returncode == 0, first.stderr[-3000:]
    shutil.copytree(tmp_path / "cache-a", tmp_path / "cache-b")
    moved = _trainer(tmp_path / "moved", "--compilation-cache-dir", str(tmp_path / "cache-b"), "--steps", "1")
    assert moved.returncode == 0, moved.stderr[-3000:]
    (restored,) = [e for e in read_jsonl(tmp_path / "moved" / "events.jsonl") if e["event"] == "restore_done"]
    assert restored["executable"] == "cache_hit"
def test_a_cache_of_code_is_created_private_and_refused_where_others_could_write_it(tmp_path):
    """Issue 51, finding 5: its entries are executables the trainer runs (trainer/trusted_cache.py)."""
    from trainer.trusted_cache import open_trusted_dir

    made = tmp_path / "run" / CACHE_NAME
    assert open_trusted_dir(str(made), chosen_by_user=False) is None
    assert stat.S_IMODE(made.stat().st_mode) == 0o700  # private from its creation, whatever the umask
    shared = tmp_path / "shared"
    shared.mkdir()
    for mode in (0o775, 0o757, 0o777):
        shared.chmod(mode)
        problem = open_trusted_dir(str(shared), chosen_by_user=True)
        assert problem is not None and f"writable by others (mode {mode:04o})" in problem
    shared.chmod(0o755)
    assert open_trusted_dir(str(shared), chosen_by_user=True) is None
    planted = tmp_path / "planted"
    planted.symlink_to(shared)
    problem = open_trusted_dir(str(planted), chosen_by_user=False)  # the default: never through a link
    assert problem is not None and problem.startswith("is a symbolic link")
    assert open_trusted_dir(str(planted), chosen_by_user=True) is None  # a link the user named is theirs


@pytest.mark.slow
def test_a_link_planted_at_the_default_cache_gets_nothing_written_through_it(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / CACHE_NAME).symlink_to(elsewhere)
    done = _trainer(tmp_path / "run", "--steps", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(elsewhere.iterdir()) == []
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: --compilation-cache-dir")]
    assert len(warnings) == 1 and "is a symbolic link" in warnings[0], done.stderr[-2000:]


@pytest.mark.slow
def test_a_cache_whose_reads_hang_is_off_after_one_bounded_lookup(tmp_path):
    """Every entry a FIFO no one writes: jax's read of it blocks for ever. The first lookup is abandoned
    after LOOKUP_BOUND_S, the cache is off, and the run compiles and finishes (it hung before)."""
    first = _trainer(tmp_path / "run", "--steps", "1")
    assert first.returncode == 0, first.stderr[-3000:]
    cache = tmp_path / "run" / CACHE_NAME
    entries = [p for p in cache.iterdir() if p.is_file()]
    assert entries
    for entry in entries:
        entry.unlink()
        os.mkfifo(entry)
    done = _trainer(tmp_path / "run", "--steps", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    off = [line for line in done.stderr.splitlines() if line.startswith("warning: compilation cache ")]
    assert len(off) == 1 and "no answer within" in off[0] and "off for the rest of this process" in off[0]
    assert CORRUPT_READ not in done.stderr  # no lookup after it was turned off


@pytest.mark.slow
def test_a_gs_cache_in_an_outage_costs_one_bounded_lookup_then_the_run_goes_on_uncached(tmp_path):
    """Issue 51, finding 4: every cache request answered 503 made each lookup wait out gcsfs's retries (about
    34 s) before jax compiled; a run of 19 s was still going after 500 s. Now the first lookup ends after
    LOOKUP_BOUND_S, the cache is off, and nothing more is asked of it (counted in requests, not seconds)."""
    from tests.support.fake_gcs import FakeGcs

    fake = FakeGcs().start()
    fake.buckets.add("cache-bucket")
    fake.failing_prefixes["xla-cache/"] = 503
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR")}
        env.update(JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", STORAGE_EMULATOR_HOST=fake.url,
                   TENSORSTORE_GCS_HTTP_URL=fake.url, GOOGLE_AUTH_TOKEN_FOR_TESTING="anon")
        done = subprocess.run([sys.executable, "-m", "trainer", "--run-dir", str(tmp_path / "run"), *TINY,
                               "--steps", "2", "--compilation-cache-dir", "gs://cache-bucket/xla-cache"],
                              cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                              timeout=300)  # cwd: with a size cap jax keeps its lock of a gs:// cache in `gs:/...` there
        asked = [line for line in fake.log if "xla-cache/" in line]
    finally:
        fake.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    off = [line for line in done.stderr.splitlines() if line.startswith("warning: compilation cache ")]
    assert len(off) == 1 and "off for the rest of this process" in off[0], done.stderr[-2000:]
    keys = {line.split(" ", 1)[1].rstrip("/") for line in asked}
    assert len(keys) == 1, keys  # one lookup (its client's own tries, on the abandoned thread), then none

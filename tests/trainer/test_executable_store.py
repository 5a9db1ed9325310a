"""The executable store (trainer/core/executable_store.py) and the start-up timeline (trainer/startup.py).

A new process on a run directory deserializes the step the previous one serialized and resumes bit for bit;
every hostile entry (truncated, altered, another model's or version's, a foreign payload, a link, racing
writers) is refused by its key or digest or fails to load, and the step is compiled as before; a store that
is not private is not used. `python -m trainer` as the user runs it for the end-to-end cases; StepCache on
real CPU devices for the entries, a new process's empty step cache standing for the process.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk_contract.compile_cache import CACHE_NAME
from elxpk_contract.event_records import STARTUP_PHASES
from tests.support.runs import read_jsonl, tiny_config
from trainer.core.executable_entries import read_entry

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--checkpoint-period", "2", "--seed", "7", "--global-batch", "8", "--seq-len", "16", "--vocab-size", "64",
        "--d-model", "32", "--n-layers", "2", "--n-heads", "2", "--d-ff", "64", "--recovery", "checkpoint"]
STORE = CACHE_NAME + "-executables"


def _trainer(run_dir: Path, steps: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # the trainer sets its own devices
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # as in a pod: the run's own cache, empty at its first start
    done = subprocess.run([sys.executable, "-m", "trainer", "--run-dir", str(run_dir), "--steps", str(steps), *TINY],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _losses(run_dir: Path) -> list[str]:
    return [m["loss"] for m in read_jsonl(run_dir / "metrics.jsonl")]


def _named(run_dir: Path, name: str) -> list[dict]:
    return [e for e in read_jsonl(run_dir / "events.jsonl") if e["event"] == name]


def _timelines(run_dir: Path) -> list[dict[str, dict]]:
    """Each process's startup events by phase, in the order the processes ran."""
    processes: list[dict[str, dict]] = []
    for event in _named(run_dir, "startup"):
        if event["phase"] == STARTUP_PHASES[0]:
            processes.append({})
        processes[-1][event["phase"]] = event
    return processes


@pytest.mark.slow
def test_a_second_process_deserializes_the_step_and_resumes_bitwise_then_a_truncated_entry_is_compiled(tmp_path):
    _trainer(tmp_path / "whole", 6)
    run = tmp_path / "resumed"
    _trainer(run, 2)
    (entry,) = (run / STORE).glob("*.xexec")
    assert entry.stat().st_mode & 0o777 == 0o600 and (run / STORE).stat().st_mode & 0o777 == 0o700
    _trainer(run, 4)  # a new process on the same run directory: loads the step
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])  # a writer killed mid-write, say
    _trainer(run, 6)
    assert _losses(run) == _losses(tmp_path / "whole")  # hex floats: bitwise
    first, loaded, refused = _named(run, "restore_done")
    assert first["executable"] in ("compiled", "cache_hit") and first["executable_store"] == "absent"
    assert (loaded["executable"], loaded["executable_store"]) == ("deserialized", "")
    assert refused["executable"] in ("compiled", "cache_hit") and refused["executable_store"].startswith("refused")
    timelines = _timelines(run)
    assert [list(t) for t in timelines] == [list(STARTUP_PHASES)] * 3  # every phase, once, in order, each process
    for timeline in timelines:  # in order, but for the step, made beside the restore (trainer/elastic/step_ahead.py)
        since = {phase: e["since_start_s"] for phase, e in timeline.items()}
        assert 0 < since["imports_done"] <= since["devices_open"] <= since["slices_joined"] <= since["restore_started"]
        assert since["restore_started"] <= since["restore_done"] <= since["first_step_done"]
        assert since["slices_joined"] <= since["executable_ready"] <= since["first_step_done"]
    assert [t["executable_ready"]["how"] for t in timelines] == [e["executable"] for e in (first, loaded, refused)]


# --- the entries, in process -------------------------------------------------------------------------------


def _mesh():
    import jax

    from trainer.core import mesh as meshlib

    devices = jax.devices()
    return meshlib.build_mesh({0: devices[:2], 1: devices[2:4]}, [0, 1])


def _new_process() -> None:
    """What a new process starts with: no step compiled in memory (only the store and jax's cache on disk)."""
    from trainer.core import step as steplib

    steplib._EXECUTABLES.clear()


@contextlib.contextmanager
def _jax_cache(path: Path | None):
    """jax's persistent cache in `path` for what runs inside (None: the tests' shared one, where the tiny step is
    most likely a hit). jax initializes its cache once; its public reset_cache makes it read the setting again."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    if path is None:
        yield
        return
    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(path))
    compilation_cache.reset_cache()
    try:
        yield
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
        compilation_cache.reset_cache()


def _get(cfg, store_dir: Path, jax_cache: Path | None = None):
    """The step as a new process gets it, with `store_dir` as its store and `jax_cache` as jax's cache."""
    from trainer.clock import SystemClock
    from trainer.core import step as steplib
    from trainer.core.executable_store import ExecutableStore

    _new_process()
    with _jax_cache(jax_cache):
        compiled, _ = steplib.StepCache(cfg, SystemClock(), store=ExecutableStore(store_dir)).get(_mesh())
    return compiled


def _one_step(compiled, cfg):
    """The step's loss and state after one step from the initial state, on the host."""
    import jax

    from trainer.clock import SystemClock
    from trainer.core import mesh as meshlib
    from trainer.core import step as steplib

    mesh = _mesh()
    state = steplib.StepCache(cfg, SystemClock()).init_state(mesh)
    tokens = np.arange(cfg.global_batch * (cfg.seq_len + 1), dtype=np.int32).reshape(cfg.global_batch, -1) % 64
    step = jax.device_put(np.int32(0), meshlib.replicated(mesh))
    state, loss = compiled.executable(state, meshlib.put_batch(tokens, mesh), step)
    return float(loss).hex(), [np.asarray(leaf).tobytes() for leaf in jax.tree.leaves(state)]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A store holding one model's step (seed 11), and that step's one-step result as compiled."""
    store = tmp_path_factory.mktemp("store") / STORE
    cfg = tiny_config("unused", seed=11)
    compiled = _get(cfg, store, tmp_path_factory.mktemp("jax-cache"))  # an empty jax cache: XLA compiles
    assert (compiled.how, compiled.store) == ("compiled", "absent")
    (entry,) = store.glob("*.xexec")
    return cfg, entry, _one_step(compiled, cfg)


def _store_with(tmp_path: Path, name: str, data: bytes) -> Path:
    store = tmp_path / STORE
    store.mkdir(mode=0o700)
    (store / name).write_bytes(data)
    return store


def test_a_loaded_step_computes_what_the_compiled_one_did(saved, tmp_path):
    cfg, entry, expected = saved
    loaded = _get(cfg, _store_with(tmp_path, entry.name, entry.read_bytes()))
    assert (loaded.how, loaded.store) == ("deserialized", "")
    assert loaded.bytes_per_device is not None  # the memory check still has XLA's figure
    assert _one_step(loaded, cfg) == expected  # loss and every state leaf, bit for bit


def _key(entry: Path) -> dict:
    return json.loads(entry.read_bytes().split(b"\n", 2)[1])["key"]


def _rewritten(entry: Path, change) -> bytes:
    """The entry with its header's key changed by `change`, its digest still right: only the key refuses it."""
    magic, header, payload = entry.read_bytes().split(b"\n", 2)
    meta = json.loads(header)
    change(meta["key"])
    return magic + b"\n" + json.dumps(meta).encode() + b"\n" + payload


def _flip_last(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 1])


HOSTILE = {
    "truncated": (lambda e: e.read_bytes()[:-100], "refused: truncated"),
    "padded": (lambda e: e.read_bytes() + b"\0", "refused: truncated"),
    "a payload byte altered": (lambda e: _flip_last(e.read_bytes()), "refused by digest"),
    "empty": (lambda e: b"", "refused: not an executable entry"),
    "another jax version": (lambda e: _rewritten(e, lambda k: k["versions"].update(jax="0.0.1")),
                            "refused by key (versions differ)"),
    "other XLA flags": (lambda e: _rewritten(e, lambda k: k["xla_flags"].update(XLA_FLAGS="--xla_foo")),
                        "refused by key (xla_flags differ)"),
    "older trainer code": (lambda e: _rewritten(e, lambda k: k.update(code="0" * 64)), "refused by key (code differ)"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_entry_is_refused_then_the_step_is_compiled(saved, tmp_path, kind):
    cfg, entry, expected = saved
    make, why = HOSTILE[kind]
    store = _store_with(tmp_path, entry.name, make(entry))
    compiled = _get(cfg, store, tmp_path / "jax-cache")
    assert compiled.how == "compiled"
    assert compiled.store.startswith(why), compiled.store
    assert _one_step(compiled, cfg) == expected
    assert read_entry(store / entry.name, _key(entry))[1] == ""  # written again, whole: the next process loads


def test_a_step_jaxs_cache_served_is_not_saved(saved, tmp_path):
    """On CPU it would serialize without its code and fail at its first run (executable_store says)."""
    cfg, _, expected = saved
    _get(cfg, tmp_path / "first", tmp_path / "jax-cache")  # compiled: jax's cache now holds it
    hit = _get(cfg, tmp_path / STORE, tmp_path / "jax-cache")
    assert (hit.how, hit.store) == ("cache_hit", "absent")
    assert list((tmp_path / STORE).iterdir()) == []
    assert _one_step(hit, cfg) == expected


def test_another_models_entry_under_this_models_name_is_refused_by_key(saved, tmp_path):
    cfg, entry, expected = saved
    other = tmp_path / "other"
    _get(tiny_config("unused", seed=11, d_ff=32), other, tmp_path / "jax-cache")  # another model (its d_ff)
    (foreign,) = other.glob("*.xexec")
    assert foreign.name != entry.name
    compiled = _get(cfg, _store_with(tmp_path, entry.name, foreign.read_bytes()))
    assert compiled.how != "deserialized" and compiled.store.startswith("refused by key (")
    assert "step" in compiled.store and "args" in compiled.store
    assert _one_step(compiled, cfg) == expected


def test_a_foreign_payload_under_a_valid_key_and_digest_fails_to_load_and_is_compiled(saved, tmp_path):
    import hashlib

    cfg, entry, expected = saved
    magic, header, _ = entry.read_bytes().split(b"\n", 2)
    meta = json.loads(header)
    junk = b"not an executable at all"
    meta.update(payload_bytes=len(junk), payload_sha256=hashlib.sha256(junk).hexdigest())
    data = magic + b"\n" + json.dumps(meta).encode() + b"\n" + junk
    compiled = _get(cfg, _store_with(tmp_path, entry.name, data))
    assert compiled.how != "deserialized" and compiled.store.startswith("failed to load (")
    assert _one_step(compiled, cfg) == expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300) | st.builds(lambda n, b: b"ELXPK-EXECUTABLE\n" + b[:n], st.integers(0, 300),
                                                 st.binary(min_size=300, max_size=300)))
def test_whatever_bytes_an_entry_holds_the_reader_refuses_them_with_a_reason(saved, tmp_path_factory, data):
    _, entry, _ = saved
    path = tmp_path_factory.mktemp("bytes") / entry.name
    path.write_bytes(data)
    payload, why = read_entry(path, _key(entry))
    assert payload is None and why.startswith("refused")


def test_an_entry_that_is_a_link_is_not_followed(saved, tmp_path):
    cfg, entry, _ = saved
    store = tmp_path / STORE
    store.mkdir(mode=0o700)
    (store / entry.name).symlink_to(entry)  # a whole, valid entry, but reached through a link
    compiled = _get(cfg, store)
    assert compiled.how != "deserialized" and compiled.store.startswith("unreadable")


@pytest.mark.parametrize("kind", ["a link to a directory", "open to other users"])
def test_a_store_that_is_not_private_is_not_used_and_one_warning_says_so(saved, tmp_path, capsys, kind):
    cfg, entry, _ = saved
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (real / entry.name).write_bytes(entry.read_bytes())
    store = tmp_path / STORE
    if kind == "a link to a directory":
        store.symlink_to(real)
    else:
        real.rename(store)
        store.chmod(0o777)
    compiled = _get(cfg, store)
    assert (compiled.how, compiled.store) != ("deserialized", "") and compiled.store == "store unusable"
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: executable store")]
    assert len(warnings) == 1 and "compiles its step" in warnings[0]
    assert sorted(p.name for p in (real if store.is_symlink() else store).iterdir()) == [entry.name]  # nothing written


def test_racing_writers_leave_one_whole_entry_and_no_temporary_file(saved, tmp_path):
    import jax

    from trainer.core.executable_store import ExecutableStore
    from trainer.core.state import state_target

    cfg, entry, expected = saved
    # What each writer writes: a step XLA compiled (one loaded from the store, or from jax's cache, serializes
    # without its code on CPU: executable_store says, and StepCache saves neither)
    compiled = _get(cfg, tmp_path / "elsewhere", tmp_path / "jax-cache")
    key = _key(entry)
    store = ExecutableStore(tmp_path / STORE)
    state = state_target(cfg, _mesh())
    trees = (jax.tree.structure(((state, 0, 0), {})), jax.tree.structure((state, 0)))
    results: list[str] = []
    writers = [threading.Thread(target=lambda: results.append(store.save(key, compiled.executable, *trees)))
               for _ in range(4)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert results == [""] * 4
    assert [p.name for p in (tmp_path / STORE).iterdir()] == [entry.name]
    assert _one_step(_get(cfg, tmp_path / STORE), cfg) == expected


def test_the_timeline_counts_from_the_process_start_and_holds_phases_until_the_recorder_exists(tmp_path):
    from tests.support.clock import ManualClock
    from trainer.metrics import RunRecorder
    from trainer.startup import PROCESS_START, StartupTimeline

    clock = ManualClock(1000.0)
    timeline = StartupTimeline(clock, process_start=990.0)
    timeline.mark("imports_done")
    clock.sleep(2.5)
    timeline.mark("devices_open")
    timeline.mark("devices_open")  # once per process: a second mark is a recovery's, not the start's
    recorder = RunRecorder(tmp_path, clock)
    timeline.attach(recorder, process=0)
    clock.sleep(1)
    timeline.mark("executable_ready", 4, how="deserialized")
    recorder.close()
    events = read_jsonl(tmp_path / "events.jsonl")
    assert [(e["phase"], e["since_start_s"], e["time"], e["how"]) for e in events] == [
        ("imports_done", 10.0, 1000.0, ""), ("devices_open", 12.5, 1002.5, ""),
        ("executable_ready", 13.5, 1003.5, "deserialized")]
    import time

    assert 0 < time.time() - PROCESS_START < 24 * 3600  # the kernel's start of this (pytest) process


@pytest.mark.slow
def test_on_an_object_store_a_new_process_loads_the_step_and_refuses_an_altered_one(tmp_path):
    """gs:// beside the checkpoints, as on a cluster: every process of a group reads its own entries there."""
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "jax-cache")}  # empty: XLA compiles first
    done = subprocess.run([sys.executable, "-m", "tests.trainer.gs_executables_scenario"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert out["store"] == "gs://bucket/run/" + STORE
    assert out["first"] == {"how": "compiled", "store": "absent"}
    assert [name.rsplit("/", 1)[-1].endswith(".xexec") for name in out["objects"]] == [True]  # the one entry
    assert out["second"] == {"how": "deserialized", "store": ""}
    assert out["altered"]["how"] != "deserialized" and out["altered"]["store"] == "refused by digest"
    assert out["truncated"]["how"] != "deserialized" and out["truncated"]["store"].startswith("refused")


def test_a_store_that_cannot_be_created_is_one_warning_and_a_compile(saved, tmp_path, capsys):
    cfg, _, expected = saved
    blocker = tmp_path / "a-file"
    blocker.write_text("where the store's parent should be\n")
    compiled = _get(cfg, blocker / STORE)
    assert compiled.how != "deserialized" and compiled.store == "store unusable"
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: executable store")]
    assert len(warnings) == 1 and "cannot be used (FileExistsError" in warnings[0]  # trainer/trusted_cache.py's words
    assert _one_step(compiled, cfg) == expected


def test_the_fingerprint_check_compiled_beside_the_read_is_the_one_the_restore_runs(tmp_path):
    """A restore compiles the check's reduction from the target's shapes while orbax reads (issue 49): its
    key must be the restored arrays' own, or the restore compiles it a second time after the read."""
    from trainer.ckpt import fingerprint
    from trainer.core.state import place, state_target

    cfg, mesh = tiny_config(tmp_path), _mesh()
    target = state_target(cfg, mesh)
    fingerprint._FUNCTIONS.clear()
    fingerprint.prepare(target)
    prepared = dict(fingerprint._FUNCTIONS)
    state = place(jax_host_zeros(target), mesh)
    fingerprint.fingerprint(state)  # the check on arrays as a restore returns them
    assert list(fingerprint._FUNCTIONS) == list(prepared)
    assert all(fingerprint._FUNCTIONS[k] is prepared[k] for k in prepared)  # not compiled again


def jax_host_zeros(target):
    import jax

    return jax.tree.map(lambda a: np.zeros(a.shape, a.dtype), target)

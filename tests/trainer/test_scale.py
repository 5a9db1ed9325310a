"""FSDP within a slice, the on-device fingerprint, and the memory check (issue 10, items 2 and 5)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from elxpk_contract.errors import UsageError
from tests.support.runs import STEPS, tiny_config


def _mesh(slices: int, per_slice: int):
    import jax

    from trainer.core import mesh as meshlib

    devices = jax.devices()
    groups = {s: devices[s * per_slice:(s + 1) * per_slice] for s in range(slices)}
    return meshlib.build_mesh(groups, list(range(slices)))


def _host_state(cfg):
    from trainer.core import state as core_state

    return core_state.host_init_state(cfg)


# ---- FSDP layout ------------------------------------------------------------------------------------

def test_fsdp_spec_splits_the_largest_divisible_dimension_and_replicates_the_rest():
    from jax.sharding import PartitionSpec as P

    from trainer.core.sharding import fsdp_spec

    assert fsdp_spec((256, 768), 2) == P(None, "data")
    assert fsdp_spec((768, 256), 2) == P("data")
    assert fsdp_spec((255, 768), 4) == P(None, "data")  # 255 is not divisible by 4
    assert fsdp_spec((255, 257), 2) == P()  # nothing divides: replicated
    assert fsdp_spec((64,), 2) == P()  # too small to be worth splitting
    assert fsdp_spec((), 2) == P()
    assert fsdp_spec((4096, 4096), 1) == P()  # one device per slice: nothing to split over


def test_state_bytes_per_device_are_the_total_over_devices_per_slice():
    """2 slices x 2 devices: each device holds about half the state, each slice a whole copy."""
    from trainer.core import state as core_state
    from trainer.core.memory import state_layout
    from trainer.core.sharding import host_copy, per_device_bytes

    cfg = tiny_config("unused", d_model=64, d_ff=256, vocab_size=256)
    mesh = _mesh(2, 2)
    host = _host_state(cfg)
    state = core_state.place(host, mesh)
    total, per_device = per_device_bytes(state)
    assert total == sum(a.nbytes for a in __import__("jax").tree.leaves(host))
    assert abs(per_device - total / 2) <= 0.03 * total, (per_device, total)
    assert per_device < 0.53 * total
    # The layout computed from the shardings alone (run.json's figure) is what the arrays hold.
    assert state_layout(core_state.state_target(cfg, mesh)) == (total, per_device)
    # Every slice holds a whole copy: its two devices' shards cover every element.
    embed = state["params"]["embed_VxD"]
    by_slice: dict[int, int] = {}
    for shard in embed.addressable_shards:
        row = next(s for s in range(2) if shard.device in mesh.devices[s])
        by_slice[row] = by_slice.get(row, 0) + shard.data.size
    assert by_slice == {0: embed.size, 1: embed.size}
    assert np.array_equal(host_copy(embed), host["params"]["embed_VxD"])


def test_run_json_records_the_memory_of_the_fsdp_state(reference_run):
    body = json.loads((reference_run.run_dir / "run.json").read_text())
    memory = body["memory"]
    assert memory["state_bytes_per_device"] < memory["state_bytes"]
    assert abs(memory["state_bytes_per_device"] - memory["state_bytes"] / 2) <= 0.1 * memory["state_bytes"]
    # A CPU device's limit is its share of the host memory available (Linux: /proc/meminfo).
    assert memory["check"] == "fits" and 0 < memory["estimate_bytes_per_device"] < memory["device_limit_bytes"]


# ---- memory check -----------------------------------------------------------------------------------

def test_a_model_too_big_for_the_device_is_refused_before_compiling():
    from trainer.core import state as core_state
    from trainer.core.memory import memory_record

    cfg = tiny_config("unused", d_model=1024, n_layers=8, d_ff=4096, vocab_size=32000, n_heads=8, seq_len=512)
    mesh = _mesh(2, 2)
    target = core_state.state_target(cfg, mesh)  # abstract: nothing is allocated
    with pytest.raises(UsageError) as raised:
        memory_record(cfg, target, mesh, limit=1 << 30)  # a 1 GiB device
    (message,) = raised.value.messages  # one line
    assert "--d-model 1024" in message and "--n-layers 8" in message and "per device" in message
    assert f"device {mesh.devices.flat[0]} has 1.00 GiB" in message
    fits = memory_record(cfg, target, mesh, limit=1 << 40)
    assert fits["check"] == "fits" and fits["device_limit_bytes"] == 1 << 40
    assert fits["estimate_bytes_per_device"] > 2 * fits["state_bytes_per_device"]  # input and output state


def test_more_devices_per_slice_lower_the_estimate():
    from trainer.core import state as core_state
    from trainer.core.memory import estimate

    cfg = tiny_config("unused", d_model=256, d_ff=1024, vocab_size=4096, n_heads=4, global_batch=16)
    abstract = core_state.abstract_state(cfg)
    one, four = estimate(cfg, abstract, 1, 4), estimate(cfg, abstract, 4, 4)
    assert four.state < one.state / 3
    assert four.activations == one.activations  # the batch share is per device either way
    # Live recovery keeps the last completed step, so the step does not donate its input: both copies count.
    assert four.kept_input == four.state and four.total >= 2 * four.state + four.gradients
    # Where the step donates (--recovery checkpoint, multi-controller) the input's buffers become the output.
    donating = estimate(cfg, abstract, 4, 4, donates=True)
    assert donating.kept_input == 0 and donating.total == four.total - four.state


# (slices, devices per slice, donate, shapes): FSDP-split and unsplit layouts, parameter-heavy and
# logit-heavy models, with and without donation, and four slices (one partial sum each).
_PARAMS = dict(d_model=256, n_layers=4, d_ff=1024, vocab_size=512, seq_len=16, n_heads=4)
_LOGITS = dict(d_model=64, n_layers=2, d_ff=256, vocab_size=4096, seq_len=64, n_heads=4)
_ESTIMATE_CASES = [(1, 4, False, _PARAMS), (2, 2, True, _PARAMS), (1, 1, False, _LOGITS), (1, 4, True, _LOGITS),
                   (4, 1, True, _PARAMS)]


@pytest.mark.parametrize("slices, per_slice, donate, shapes", _ESTIMATE_CASES,
                         ids=["fsdp-1x4", "fsdp-2x2-donating", "logits-1x1", "logits-1x4-donating", "4x1"])
def test_the_estimate_never_overshoots_xla_by_more_than_its_margin(slices, per_slice, donate, shapes):
    """The pre-compile estimate against what XLA's buffer assignment of the compiled step needs per device.
    It refuses only above ESTIMATE_MARGIN x the device, so it must never overshoot by more than that (or it
    would refuse a step that fits); below XLA's figure is allowed (the compile's own check catches it), but
    not by far, or it would wave through what is hopeless and cost a long compile."""
    from trainer.clock import SystemClock
    from trainer.core import state as core_state
    from trainer.core import step as steplib
    from trainer.core.memory import ESTIMATE_MARGIN, estimate

    cfg = tiny_config("unused", num_slices=slices, devices_per_slice=per_slice, global_batch=8, **shapes)
    mesh = _mesh(slices, per_slice)
    compiled, _ = steplib.StepCache(cfg, SystemClock(), donate=donate).get(mesh)
    assert compiled.bytes_per_device is not None and compiled.bytes_per_device > 0
    need = estimate(cfg, core_state.state_target(cfg, mesh), per_slice, slices * per_slice, donates=donate)
    assert 0.6 <= need.total / compiled.bytes_per_device <= ESTIMATE_MARGIN, (need, compiled.bytes_per_device)


def test_a_compiled_step_too_big_for_the_device_is_refused_before_it_runs(reference_run, tmp_path):
    """XLA's own figure for the full width, checked before the first step: one line, exit 2, nothing run.
    (A narrower mesh waits for more slices instead: test_resize.py.)"""
    from elxpk_contract.faults import FaultSchedule
    from trainer.clock import SystemClock
    from trainer.core import step as steplib
    from trainer.core.memory import compiled_refusal
    from trainer.elastic.loop import train
    from trainer.elastic.slices import SimulatedSlices

    cfg, mesh = reference_run.cfg, _mesh(2, 2)
    compiled, _ = steplib.StepCache(cfg, SystemClock(), donate=True).get(mesh)  # --recovery checkpoint donates
    need = compiled.bytes_per_device
    assert need is not None and compiled_refusal(cfg, need, mesh, need) is None
    refusal = compiled_refusal(cfg, need, mesh, need - 1)
    assert refusal is not None
    (message,) = refusal.messages
    assert "XLA's memory analysis of the compiled step" in message and "on 2 x 2 devices" in message
    assert f"--global-batch {cfg.global_batch}" in message and "has 0.00 GiB" in message
    # Each attempt that compiled says what its step needs. An executable jax loaded from its persistent
    # compilation cache (the tests' XLA cache, tests/support/xla_cache.py) carries no memory analysis: the
    # attempt then says nothing, and the fit check has only the estimate (docs/testing.md, "How CI runs").
    (first, *_) = reference_run.events_named("restore_done")
    assert first["compiled_bytes_per_device"] in (need, None)
    # End to end: a device one byte short. The estimate is within its margin of that, so it lets the step
    # compile ("unsure" in run.json), and XLA's figure refuses it before any step runs.
    # Another fingerprint: compiled afresh. No remat: --remat-policy auto would pick one whose estimate fits
    # (tests/trainer/test_remat.py), and the CPU's XLA figure does not shrink with it.
    small = tiny_config(tmp_path, seed=8, remat_policy="none")
    clock = SystemClock()
    backend = SimulatedSlices(2, 2, FaultSchedule(), clock, memory_limit_bytes=need - 1)
    with pytest.raises(UsageError, match="XLA's memory analysis"):
        train(small, backend=backend, clock=clock)
    assert json.loads((tmp_path / "run.json").read_text())["memory"]["check"].startswith("unsure: the estimate is")
    assert not (tmp_path / "metrics.jsonl").exists() or not (tmp_path / "metrics.jsonl").read_text().strip()


# ---- fingerprint ------------------------------------------------------------------------------------

def test_fingerprint_is_the_same_on_any_mesh_and_on_the_host():
    from trainer.ckpt.fingerprint import fingerprint
    from trainer.core import state as core_state

    cfg = tiny_config("unused")
    host = _host_state(cfg)
    on_host = fingerprint(host)
    assert len(on_host) > 10 and all(len(v) == 16 for v in on_host.values())
    for slices, per_slice in ((2, 2), (1, 2), (1, 4), (4, 1)):
        assert fingerprint(core_state.place(host, _mesh(slices, per_slice))) == on_host, (slices, per_slice)


def test_fingerprint_catches_any_single_changed_element_and_moved_elements():
    import jax.numpy as jnp

    from trainer.ckpt.fingerprint import fingerprint, mismatch

    rng = np.random.default_rng(3)
    base = rng.standard_normal((64, 48)).astype(np.float32)
    want = fingerprint({"w": base})
    for flat in rng.choice(base.size, 20, replace=False):
        for bit in (0, 7, 22, 31):
            changed = base.copy().reshape(-1)
            changed.view(np.uint32)[flat] ^= np.uint32(1 << bit)
            assert fingerprint({"w": changed.reshape(base.shape)}) != want
    swapped = base.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    assert fingerprint({"w": swapped}) != want  # the same values at other indices
    assert fingerprint({"w": base.T.copy().T}) == want
    # bf16 and int arrays fingerprint too (by their own bits)
    halves = jnp.asarray(base, jnp.bfloat16)
    assert fingerprint({"b": halves}) != fingerprint({"b": halves * 2})
    assert fingerprint({"i": np.arange(10, dtype=np.int32)}) != fingerprint({"i": np.arange(1, 11, dtype=np.int32)})
    assert mismatch(want, fingerprint({"w": swapped})).startswith("fingerprint mismatch: w ")


def test_restore_onto_a_different_mesh_reshards_and_matches_the_fingerprint(reference_run, tmp_path):
    """The 2 x 2 run's newest checkpoint restored onto one slice of 4 devices: FSDP over 4 instead of 2."""
    import shutil

    from elxpk_storage import digest
    from trainer.ckpt.checkpoint import CheckpointStore
    from trainer.ckpt.fingerprint import fingerprint
    from trainer.clock import SystemClock
    from trainer.core import state as core_state

    shutil.copytree(reference_run.run_dir / "checkpoints", tmp_path / "checkpoints")
    cfg = tiny_config(tmp_path)

    class Recorder:
        events: list = []

        def event(self, name, step, **details):
            self.events.append((name, step, details))

    store = CheckpointStore(cfg, fault_hook=lambda point, step: None, recorder=Recorder(), clock=SystemClock())
    try:
        mesh = _mesh(1, 4)
        step, state, data = store.restore_latest(core_state.state_target(cfg, mesh))
    finally:
        store.close(raise_errors=True)
    assert step == STEPS and Recorder.events == []
    assert data == {"global_next_index": STEPS * cfg.global_batch}
    embed = state["params"]["embed_VxD"]
    assert {s.data.shape for s in embed.addressable_shards} == {(embed.shape[0] // 4, embed.shape[1])}  # 4 ways
    record = digest.read_digest(tmp_path / "checkpoints" / str(STEPS))
    assert fingerprint(state) == record["arrays"]
    final = reference_run.result.params["embed_VxD"]
    assert np.array_equal(np.asarray(embed), final)


@pytest.mark.parametrize("where", [0.02, 0.25, 0.5, 0.75, 0.98])
def test_a_flipped_byte_anywhere_in_the_array_data_never_restores_a_wrong_state(reference_run, tmp_path, where):
    """Orbax restores many flipped bytes silently; the fingerprint catches every one that reaches the state.

    A byte that restore never reads (an unreferenced copy inside orbax's OCDBT data file) cannot change
    the state: then the step is restored, and it is bitwise the state that was saved."""
    import shutil

    from trainer.ckpt.checkpoint import CheckpointStore
    from trainer.clock import SystemClock
    from trainer.core import state as core_state
    from trainer.core.sharding import host_copy

    shutil.copytree(reference_run.run_dir / "checkpoints", tmp_path / "checkpoints")
    step_dir = tmp_path / "checkpoints" / str(STEPS)
    data_files = sorted((p for p in (step_dir / "state").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    target = data_files[-1]
    data = bytearray(target.read_bytes())
    data[int(len(data) * where)] ^= 0x10
    target.write_bytes(bytes(data))

    skipped: list = []

    class Recorder:
        def event(self, name, step, **details):
            skipped.append((name, step, details["reason"]))

    cfg = tiny_config(tmp_path)
    store = CheckpointStore(cfg, fault_hook=lambda point, step: None, recorder=Recorder(), clock=SystemClock())
    try:
        step, state, _ = store.restore_latest(core_state.state_target(cfg, _mesh(2, 2)))
    finally:
        store.close(raise_errors=True)
    if step == STEPS:  # the flip missed every byte restore reads
        assert skipped == []
        final = reference_run.result.params
        assert all(np.array_equal(host_copy(state["params"][k]), final[k]) for k in ("embed_VxD", "pos_LxD"))
        return
    assert step == STEPS - cfg.checkpoint_period
    ((name, at, reason),) = skipped
    assert name == "checkpoint_skipped" and at == STEPS
    assert reason.startswith(("fingerprint mismatch: ", "orbax could not read it")), reason


def _bytes_read() -> int:
    for line in Path("/proc/self/io").read_text(encoding="ascii").splitlines():  # every read of every thread
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/io"), reason="needs Linux /proc/self/io")
def test_a_save_reads_nothing_back_and_a_resume_reads_each_byte_once(tmp_path):
    from pathlib import Path

    from trainer.ckpt.checkpoint import CheckpointStore
    from trainer.clock import SystemClock
    from trainer.core import state as core_state

    class Recorder:
        def event(self, name, step, **details):
            assert name != "checkpoint_skipped", details

    cfg = tiny_config(tmp_path, d_model=128, d_ff=512, vocab_size=2048, n_heads=4)
    mesh = _mesh(2, 2)
    state = core_state.place(_host_state(cfg), mesh)
    store = CheckpointStore(cfg, fault_hook=lambda point, step: None, recorder=Recorder(), clock=SystemClock())
    store.save(1, state, {"global_next_index": 0})  # the first save sets orbax up (and imports)
    store.poll(block=True)
    before = _bytes_read()
    store.save(2, state, {"global_next_index": 8})
    store.poll(block=True)
    read_after_save = _bytes_read() - before
    store.close(raise_errors=True)
    size = sum(p.stat().st_size for p in (Path(cfg.checkpoint_path) / "2").rglob("*") if p.is_file())
    assert size > 1_000_000
    assert read_after_save <= 0.15 * size, (read_after_save, size)

    store = CheckpointStore(cfg, fault_hook=lambda point, step: None, recorder=Recorder(), clock=SystemClock())
    before = _bytes_read()
    step, restored, data = store.restore_latest(core_state.state_target(cfg, mesh))
    read_on_resume = _bytes_read() - before
    store.close(raise_errors=True)
    assert step == 2 and data == {"global_next_index": 8}
    assert size * 0.9 <= read_on_resume <= 1.25 * size, (read_on_resume, size)


def test_the_same_devices_in_another_layout_get_their_own_executable():
    """1 x 4 and 2 x 2 over the same four devices are two layouts: the step cache must not hand one's
    executable to the other (it would be refused for its shardings, or worse)."""
    import jax

    from trainer.clock import SystemClock
    from trainer.core import step as steplib

    wide = tiny_config("unused", num_slices=1, devices_per_slice=4)
    square = tiny_config("unused", num_slices=2, devices_per_slice=2)
    assert wide.fingerprint() == square.fingerprint()  # the topology is not part of the checkpoint
    one, _ = steplib.StepCache(wide, SystemClock()).get(_mesh(1, 4))
    two, _ = steplib.StepCache(square, SystemClock()).get(_mesh(2, 2))  # either may be cached already
    assert two is not one
    assert jax.tree.leaves(one.executable.input_shardings)[0].mesh.shape == {"slice": 1, "data": 4}
    assert jax.tree.leaves(two.executable.input_shardings)[0].mesh.shape == {"slice": 2, "data": 2}

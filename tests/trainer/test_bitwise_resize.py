"""Bitwise resize (issue 12): with --deterministic-reduction on (the default) the result does not depend on
how many slices computed it.

- The compiled step gives bitwise the same loss and parameters on every subset of the job's slices, for
  2 x 2 (FSDP), 3 x 1 and 4 x 1; the per-shard partial gradients are bitwise equal at every width.
- With the plain all-reduce (off) the same comparison differs: the width tests can tell.
- Whole runs: resize with the slice kept away, resize with a scale-up, and 3 and 4 slices losing one or two,
  bitwise equal to the uninterrupted run at every step, every example exactly once, same final parameters.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.runs import STEPS, run_trainer, tiny_config

TOPOLOGIES = {  # (num_slices, devices_per_slice, global_batch): the active subsets tried
    (2, 2, 8): [[0, 1], [0], [1]],
    (3, 1, 6): [[0, 1, 2], [0, 2], [1, 2], [1]],
    (4, 1, 12): [[0, 1, 2, 3], [0, 1, 3], [2, 3], [1]],
}


def _slice_devices(num_slices: int, per_slice: int) -> dict[int, list]:
    import jax

    devices = jax.devices()
    return {s: devices[s * per_slice:(s + 1) * per_slice] for s in range(num_slices)}


def _steps_on(cfg, active: list[int], steps: int = 3) -> tuple[list[str], list[np.ndarray]]:
    """`steps` compiled steps from the initial state on the mesh of `active`: losses (hex) and parameters."""
    import jax

    from trainer.clock import SystemClock
    from trainer.core import mesh as meshlib
    from trainer.core import step as steplib
    from trainer.core.sharding import host_copy
    from trainer.data.data import SyntheticTokens

    mesh = meshlib.build_mesh(_slice_devices(cfg.num_slices, cfg.devices_per_slice), active)
    cache = steplib.StepCache(cfg, SystemClock())
    compiled, _ = cache.get(mesh)
    state = cache.init_state(mesh)
    data = SyntheticTokens(cfg.vocab_size, cfg.seq_len, cfg.seed)
    losses = []
    for step in range(steps):
        tokens = meshlib.put_batch(data.examples(step * cfg.global_batch, (step + 1) * cfg.global_batch), mesh)
        state, loss = compiled.executable(state, tokens, jax.device_put(np.int32(step), meshlib.replicated(mesh)))
        losses.append(float(loss).hex())
    return losses, [host_copy(leaf) for leaf in jax.tree.leaves(state["params"])]


def _same_bits(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("topology", list(TOPOLOGIES), ids=lambda t: f"{t[0]}x{t[1]}")
def test_step_is_bitwise_equal_on_every_subset_of_slices(tmp_path, topology):
    num_slices, per_slice, batch = topology
    cfg = tiny_config(tmp_path, num_slices=num_slices, devices_per_slice=per_slice, global_batch=batch)
    full_losses, full_params = _steps_on(cfg, TOPOLOGIES[topology][0])
    for active in TOPOLOGIES[topology][1:]:
        losses, params = _steps_on(cfg, active)
        assert losses == full_losses, active
        assert _same_bits(params, full_params), active


def test_plain_all_reduce_depends_on_the_width(tmp_path):
    """The control: the comparison above does see a reduction order that follows the active slice count."""
    cfg = tiny_config(tmp_path, deterministic_reduction="off")
    _, full = _steps_on(cfg, [0, 1])
    _, alone = _steps_on(cfg, [0])
    assert not _same_bits(full, alone)


@pytest.mark.parametrize("per_slice", [2, 1], ids=["2x2", "2x1-one-device-left"])
def test_per_shard_partial_gradients_are_bitwise_equal_at_every_width(tmp_path, per_slice):
    """The per-shard program is the same at every width: shard n's partial sum has the same bits whether its
    slice computes only it (full width) or carries it with another (one survivor: a 2-slot scan). With one
    device per slice the survivor's mesh is a single device, which XLA compiles without SPMD partitioning (and
    the step without CSE); with two, every mesh is partitioned and CSE stays on."""
    import jax

    from trainer.core import mesh as meshlib
    from trainer.core import reduction
    from trainer.core import state as core_state
    from trainer.data.data import SyntheticTokens

    cfg = tiny_config(tmp_path, devices_per_slice=per_slice, global_batch=4 * per_slice)
    host_state = core_state.host_init_state(cfg)
    tokens = SyntheticTokens(cfg.vocab_size, cfg.seq_len, cfg.seed).examples(0, cfg.global_batch)
    shards = tokens.reshape(cfg.num_slices, -1, tokens.shape[-1])
    key = jax.random.fold_in(core_state.base_key(cfg.seed), 5)
    by_width = {}
    for active in ([0, 1], [1]):  # one slot per slice, then both shards on slice 1
        mesh = meshlib.build_mesh(_slice_devices(2, per_slice), active)
        layout = reduction.slot_layout(cfg.num_slices, len(active))
        slots = shards[np.maximum(layout, 0)]  # [A, S, B/N, L+1]
        slots = jax.device_put(slots, jax.sharding.NamedSharding(mesh, reduction.SLOTS_SPEC))
        ids = jax.device_put(np.maximum(layout, 0), jax.sharding.NamedSharding(mesh, jax.P("slice", None)))
        params = core_state.place(host_state, mesh)["params"]
        fn = jax.jit(reduction.shard_gradients_fn(cfg, mesh)).lower(params, slots, ids, key).compile(
            compiler_options=reduction.compiler_options(cfg, mesh))
        losses, partials = fn(params, slots, ids, key)
        flat = layout.reshape(-1)
        by_width[len(active)] = {
            n: (np.asarray(losses)[flat == n][0].tobytes(),
                [np.asarray(g)[flat == n][0].tobytes() for g in jax.tree.leaves(partials)])
            for n in range(cfg.num_slices)}
    assert by_width[2] == by_width[1]
    assert by_width[2][0] != by_width[2][1]  # two different shards: the comparison compares something


def test_slot_layout_covers_every_shard_once():
    from trainer.core.reduction import slot_layout

    assert slot_layout(2, 2).tolist() == [[0], [1]]
    assert slot_layout(2, 1).tolist() == [[0, 1]]
    assert slot_layout(3, 2).tolist() == [[0, 1], [2, -1]]
    assert slot_layout(4, 3).tolist() == [[0, 1], [2, 3], [-1, -1]]
    for shards in range(1, 9):
        for active in range(1, shards + 1):
            flat = slot_layout(shards, active).reshape(-1)
            assert sorted(flat[flat >= 0].tolist()) == list(range(shards))


def _assert_bitwise_run(run, reference) -> None:
    ref, got = reference.last_by_step(), run.last_by_step()
    assert [got[s]["loss"] for s in range(STEPS)] == [ref[s]["loss"] for s in range(STEPS)]
    ids = [i for s in range(STEPS) for i in range(*got[s]["examples"])]
    assert ids == list(range(STEPS * run.cfg.global_batch))  # every example exactly once
    assert _same_bits(_leaves(run.result.params), _leaves(reference.result.params))  # final parameters


def _leaves(params) -> list[np.ndarray]:
    import jax

    return [np.asarray(leaf) for leaf in jax.tree.leaves(params)]


def test_resize_with_scale_up_is_bitwise(reference_run, resize_run):
    assert {tuple(r["slices"]) for r in resize_run.metrics} == {(0, 1), (0,)}  # both widths ran
    _assert_bitwise_run(resize_run, reference_run)


def test_resize_with_the_slice_kept_away_is_bitwise(reference_run, tmp_path):
    run = run_trainer(tmp_path, faults=["1@6"], elastic_min_slice_count=1)
    assert run.last_by_step()[STEPS - 1]["slices"] == [0]
    _assert_bitwise_run(run, reference_run)


@pytest.mark.parametrize(("num_slices", "batch", "faults", "widths"), [
    (3, 6, ["1@5+11"], {(0, 1, 2), (0, 2)}),
    (3, 6, ["0@5", "2@7+13"], {(0, 1, 2), (1, 2), (1,)}),
    (4, 12, ["3@5+13"], {(0, 1, 2, 3), (0, 1, 2)}),
    (4, 12, ["1@5", "2@7+13"], {(0, 1, 2, 3), (0, 2, 3), (0, 3)}),
], ids=["3-lose-1", "3-lose-2", "4-lose-1", "4-lose-2"])
def test_more_slices_losing_one_or_two_is_bitwise(tmp_path, num_slices, batch, faults, widths):
    topology = dict(num_slices=num_slices, devices_per_slice=1, global_batch=batch, elastic_min_slice_count=1)
    reference = run_trainer(tmp_path / "reference", **topology)
    run = run_trainer(tmp_path / "resize", faults=faults, **topology)
    assert {tuple(r["slices"]) for r in run.metrics} == widths
    _assert_bitwise_run(run, reference)

"""Real token data (--data): .npy streams and ArrayRecord files read by global example id (issue 10).

The runs use tests/support/runs.py's tiny model; the data files are written with the trainer's own
writers (trainer/data/tokens.py), and read back through the same path a `python -m trainer --data` run takes.
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from elxpk.runs.compare import compare_runs
from elxpk.runs.rundir import load_run as load_run_dir
from elxpk_contract.errors import UsageError
from tests.support.runs import KILL_STEP, PERIOD, STEPS, run_trainer, tiny_config
from trainer.data.data import open_dataset
from trainer.data.tokens import open_stream, write_array_record, write_npy

SEQ, BATCH, VOCAB = 16, 8, 64  # tiny_config's seq_len, global_batch and vocab_size
NEEDED = STEPS * BATCH * SEQ + 1  # tokens a STEPS-step run reads


def _stream(n: int, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, n).astype(np.uint16)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tokens")
    write_npy(str(d / "repeated.npy"), np.full(NEEDED + 50, 5))
    # A structured stream (a noisy count mod VOCAB) so the loss has something to fall towards.
    ramp = (np.arange(NEEDED + 50) * 7 + _stream(NEEDED + 50) // 32) % VOCAB
    write_npy(str(d / "ramp.npy"), ramp)
    return d


@pytest.fixture(scope="module")
def ramp_reference(data_dir, tmp_path_factory):
    return run_trainer(tmp_path_factory.mktemp("ramp-ref"), data=str(data_dir / "ramp.npy"))


def _final(run) -> float:
    return float.fromhex(run.last_by_step()[STEPS - 1]["loss"])


def test_one_repeated_token_is_learned_and_synthetic_data_is_not(data_dir, tmp_path):
    settings = dict(dropout=0.0, learning_rate=1e-2, elastic_enabled=False)
    repeated = run_trainer(tmp_path / "repeated", data=str(data_dir / "repeated.npy"), **settings)
    synthetic = run_trainer(tmp_path / "synthetic", **settings)
    chance = math.log(VOCAB)
    assert float.fromhex(repeated.metrics[0]["loss"]) > 0.5 * chance  # it starts at chance like any run
    assert _final(repeated) < 0.1
    assert _final(synthetic) > 0.8 * chance
    info = json.loads((tmp_path / "repeated" / "run.json").read_text())
    assert info["config"]["data"] == str(data_dir / "repeated.npy")
    assert info["fingerprint_fields"]["dataset"].startswith(f"npy:{data_dir / 'repeated.npy'}:uint16:{NEEDED + 50}:")
    synthetic_info = json.loads((tmp_path / "synthetic" / "run.json").read_text())
    assert synthetic_info["fingerprint_fields"]["dataset"] == "synthetic-v1"


def test_batches_are_the_documented_slices_of_the_stream(data_dir):
    tokens = np.load(data_dir / "ramp.npy")
    cfg, data = open_dataset(tiny_config("unused", data=str(data_dir / "ramp.npy")))
    first = data.next_batch()
    second = data.next_batch()
    assert (first.first, first.end, second.first, second.end) == (0, BATCH, BATCH, 2 * BATCH)
    for i in range(2 * BATCH):
        batch = first if i < BATCH else second
        assert np.array_equal(batch.tokens[i % BATCH], tokens[i * SEQ: i * SEQ + SEQ + 1])
    assert first.tokens.dtype == np.int32
    data.set_state({"global_next_index": 5})  # a restore moves to any example id
    assert np.array_equal(data.next_batch().tokens[0], tokens[5 * SEQ: 6 * SEQ + 1])
    assert cfg.dataset_identity != "synthetic-v1" and cfg.fingerprint() != tiny_config("unused").fingerprint()


def test_a_killed_real_data_run_resumes_bitwise_with_every_example_once(data_dir, ramp_reference, tmp_path):
    killed = run_trainer(tmp_path, data=str(data_dir / "ramp.npy"), faults=[f"1@{KILL_STEP}"], revive_after=0.2)
    assert killed.result.recoveries == 1
    restore = killed.events_named("restore_done")[-1]
    assert restore["from_checkpoint"] and restore["step"] == (KILL_STEP // PERIOD) * PERIOD
    comparison = compare_runs(load_run_dir(ramp_reference.run_dir), load_run_dir(killed.run_dir))
    assert comparison.passed, comparison.failures()
    assert comparison.bitwise_equal == len(comparison.steps) == STEPS
    assert comparison.examples_b.exactly_once and comparison.examples_b.unique == STEPS * BATCH
    assert comparison.data_order_mismatches == 0
    # The data really was the file: the reference's losses are not the synthetic run's.
    assert _final(ramp_reference) < float.fromhex(ramp_reference.metrics[0]["loss"])


def test_a_checkpoint_refuses_to_resume_on_other_data(data_dir, ramp_reference, tmp_path):
    import shutil

    shutil.copytree(ramp_reference.run_dir / "checkpoints", tmp_path / "checkpoints")
    other = _stream(NEEDED + 4 * BATCH * SEQ, seed=9)
    write_npy(str(tmp_path / "other.npy"), other)
    with pytest.raises(UsageError, match="different configuration"):
        run_trainer(tmp_path, data=str(tmp_path / "other.npy"), steps=STEPS + 4)


def test_array_record_reads_back_the_same_examples_as_npy(tmp_path):
    tokens = _stream(5000)
    write_npy(str(tmp_path / "t.npy"), tokens)
    # 333-token records: example boundaries fall inside records and examples span several of them.
    records = write_array_record(str(tmp_path / "t.array_record"), tokens, record_tokens=333)
    assert records == math.ceil(5000 / 333)
    npy = open_stream(str(tmp_path / "t.npy"), SEQ, VOCAB)
    rec = open_stream(str(tmp_path / "t.array_record"), SEQ, VOCAB)
    assert rec.num_examples == npy.num_examples == (5000 - 1) // SEQ
    assert np.array_equal(rec.examples(0, rec.num_examples), npy.examples(0, npy.num_examples))
    assert np.array_equal(rec.examples(100, 107), npy.examples(100, 107))
    assert rec.info.dtype == npy.info.dtype == np.uint16 and rec.info.num_tokens == 5000
    # Two files are one stream in the order given.
    write_array_record(str(tmp_path / "a.array_record"), tokens[:3330], record_tokens=333)
    write_array_record(str(tmp_path / "b.array_record"), tokens[3330:], record_tokens=333)
    both = open_stream(f"{tmp_path / 'a.array_record'},{tmp_path / 'b.array_record'}", SEQ, VOCAB)
    assert np.array_equal(both.examples(0, both.num_examples), npy.examples(0, npy.num_examples))


def test_a_run_on_array_record_trains_like_the_npy_run(data_dir, ramp_reference, tmp_path):
    write_array_record(str(tmp_path / "ramp.array_record"), np.load(data_dir / "ramp.npy"), record_tokens=100)
    run = run_trainer(tmp_path / "run", data=str(tmp_path / "ramp.array_record"), elastic_enabled=False)
    assert {s: r["loss"] for s, r in run.last_by_step().items()} == \
        {s: r["loss"] for s, r in ramp_reference.last_by_step().items()}


def _npy_bytes(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


@pytest.mark.parametrize("name, content, message", [
    ("float.npy", _npy_bytes(np.zeros(400, np.float32)), "token dtype float32 is not supported; use uint16"),
    ("int64.npy", _npy_bytes(np.zeros(400, np.int64)), "token dtype int64 is not supported"),
    ("matrix.npy", _npy_bytes(np.zeros((20, 20), np.uint16)), "holds a 2-D array of shape (20, 20); it must be one"),
    ("cut.npy", _npy_bytes(np.zeros(400, np.uint32))[:-10], "truncated or padded: its header promises 400 uint32"),
    ("text.npy", b"hello, not numpy\n" * 10, "not a readable .npy file"),
    ("tokens.bin", _npy_bytes(np.zeros(400, np.uint16)), "use one .npy file of a 1-D token stream"),
])
def test_bad_files_are_one_line_errors(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(UsageError) as err:
        open_stream(str(tmp_path / name), SEQ, VOCAB)
    assert len(err.value.messages) == 1 and "\n" not in err.value.messages[0]
    assert err.value.messages[0].startswith(f"--data {tmp_path / name}: ")
    assert message in err.value.messages[0]


def test_a_missing_file_and_a_bad_array_record_are_one_line_errors(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        open_stream(str(tmp_path / "absent.npy"), SEQ, VOCAB)
    with pytest.raises(UsageError, match="ArrayRecord files are read from local paths"):
        open_stream("gs://bucket/t.array_record", SEQ, VOCAB)
    (tmp_path / "junk.array_record").write_bytes(b"\0" * 100)
    with pytest.raises(UsageError, match="not a readable ArrayRecord file"):
        open_stream(str(tmp_path / "junk.array_record"), SEQ, VOCAB)
    from array_record.python.array_record_module import ArrayRecordWriter

    writer = ArrayRecordWriter(str(tmp_path / "ragged.array_record"), "group_size:1")
    for n in (100, 90, 100):  # the middle record is short: offsets by division would be wrong
        writer.write(_npy_bytes(np.zeros(n, np.uint16)))
    writer.close()
    stream = open_stream(str(tmp_path / "ragged.array_record"), SEQ, VOCAB)
    with pytest.raises(UsageError, match="record 1 holds 90 tokens, record 0 100; every record but the last"):
        stream.examples(0, 15)


def test_a_token_outside_the_vocabulary_names_vocab_size(tmp_path):
    tokens = _stream(NEEDED)
    tokens[SEQ * 3 + 2] = 300
    write_npy(str(tmp_path / "t.npy"), tokens)
    with pytest.raises(UsageError) as err:
        open_dataset(tiny_config(tmp_path, data=str(tmp_path / "t.npy")))
    assert list(err.value.messages) == [f"--data {tmp_path / 't.npy'}: token id 300 (near example 3) is not below "
                                        f"--vocab-size {VOCAB}; set --vocab-size to at least 301 (the tokenizer's size)"]
    stream = open_stream(str(tmp_path / "t.npy"), SEQ, VOCAB)  # served batches are checked too
    stream.examples(0, 3)
    with pytest.raises(UsageError, match="is not below --vocab-size 64"):
        stream.examples(2, 4)


def test_too_little_data_is_refused_before_anything_runs(tmp_path, repo_root):
    write_npy(str(tmp_path / "short.npy"), _stream(1000))
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "trainer", "--run-dir", str(run_dir), "--data", str(tmp_path / "short.npy"),
         "--steps", "10", "--seq-len", "16", "--vocab-size", "64", "--global-batch", "8"],
        cwd=repo_root, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.splitlines() == [
        f"error: --data {tmp_path / 'short.npy'}: 1000 tokens make 62 examples of --seq-len 16 (seq_len + 1 "
        "tokens each, one shared), the run needs 80 (--steps 10 x --global-batch 8); give more tokens or train "
        "fewer --steps"]
    assert not run_dir.exists() or not any(run_dir.iterdir())  # nothing written


def test_gs_paths_go_through_the_checkpoints_filesystem_layer(tmp_path, repo_root):
    tokens = _stream(3000)
    write_npy(str(tmp_path / "t.npy"), tokens)
    proc = subprocess.run([sys.executable, "-m", "tests.trainer.gs_tokens_scenario", str(tmp_path / "t.npy")],
                          cwd=repo_root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    local = open_stream(str(tmp_path / "t.npy"), SEQ, VOCAB)
    assert out["examples"] == local.examples(0, local.num_examples).tolist()
    assert out["identity"].startswith("npy:gs://bucket/data/t.npy:uint16:3000:")
    assert out["identity"].split(":")[-1] == local.info.identity().split(":")[-1]  # same content hash
    assert out["truncated"].startswith("--data gs://bucket/data/cut.npy: truncated or padded")


def test_local_run_resume_check_fingerprints_the_data_like_the_trainer(data_dir, ramp_reference, tmp_path):
    import dataclasses

    from elxpk.local.resume import ExistingRun
    from elxpk.local.run import check_same_configuration

    existing = ExistingRun(ramp_reference.run_dir, STEPS, (STEPS,))
    check_same_configuration(existing, ramp_reference.cfg)  # same file: resumable (the config holds only the path)
    write_npy(str(tmp_path / "other.npy"), _stream(NEEDED, seed=11))
    with pytest.raises(UsageError, match=r"holds a run of another configuration \(dataset 'npy:"):
        check_same_configuration(existing, dataclasses.replace(ramp_reference.cfg, data=str(tmp_path / "other.npy")))

"""The reader of a chunked run (`--run-dir gs://...`, elxpk_storage/run_records.py), on a local copy of one:
the same `Run` as one metrics.jsonl holding the lines in the order the writers wrote them, whatever the
chunks' sizes, the writers' generations and processes, the names' zero padding and the stray objects
beside them; a torn last line of a chunk is kept out and counted, never a failure. Hypothesis draws the
layouts; the writer's own upload (trainer/record_sinks.py) is checked against the same reader."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk.runs.rundir import load_run
from elxpk_contract.records import Metric
from elxpk_storage.run_records import ordered_chunks

STRAYS = ("run.json.tmp", "metrics-1.jsonl", "metrics-00000001.json", "notes.txt", "events-x.jsonl")


def metric_line(step: int) -> str:
    record = Metric(step=step, loss=float(step + 0.5).hex(), lr=1e-3, step_time_s=0.01,
                    examples=(8 * step, 8 * step + 8), slices=(0, 1), time=1.7e9 + step)
    return json.dumps(record.to_json()) + "\n"


@st.composite
def layouts(draw):
    """(lines in writing order, {relative path: bytes}, torn pieces written): the lines cut into chunks of
    writers that start one after another, with gaps in the generation numbers and any zero padding."""
    lines = [metric_line(s) for s in range(draw(st.integers(1, 40)))]
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(lines) - 1)), max_size=8)))
    pieces = [lines[a:b] for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True) if lines[a:b]]
    files: dict[str, bytes] = {}
    generation, seq, torn = draw(st.integers(1, 5)), 0, 0
    writer = None
    for piece in pieces:
        if writer is None or draw(st.booleans()):  # a new writer: a restarted process
            generation += draw(st.integers(1, 3))
            width = draw(st.integers(6, 8))
            writer = f"w{generation:0{width}d}-p{draw(st.integers(0, 3)):05d}"
            seq = draw(st.integers(0, 2))
        data = "".join(piece)
        if draw(st.integers(0, 4)) == 0:  # a damaged object: its last line cut short
            data += '{"step": 99, "loss'
            torn += 1
        files[f"records/{writer}/metrics-{seq:0{draw(st.integers(8, 10))}d}.jsonl"] = data.encode()
        seq += draw(st.integers(1, 3))
    for stray in draw(st.lists(st.sampled_from(STRAYS), max_size=3)):
        files[f"records/{writer}/{stray}"] = b"not a record\n"
    return lines, files, torn


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts())
def test_a_chunked_run_reads_as_its_lines_in_writing_order(layout):
    lines, files, torn = layout
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for relative, data in files.items():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_bytes(data)
        run = load_run(root)
    expected = [json.loads(line) for line in lines]
    assert [run.metrics.record(i).to_json() for i in range(len(run.metrics))] == expected
    assert run.damaged_lines == torn


@given(st.lists(st.tuples(st.integers(1, 10**7), st.integers(0, 99999), st.integers(0, 10**9)), min_size=1,
                max_size=20, unique=True), st.randoms())
def test_chunks_order_by_generation_process_and_number_not_by_text(keys, rnd):
    paths = [f"b/run/records/w{g:06d}-p{p:05d}/metrics-{n:08d}.jsonl" for g, p, n in keys]
    shuffled = list(paths)
    rnd.shuffle(shuffled)
    ordered = ordered_chunks([*shuffled, "b/run/records/w000001-p00000/run.json", "b/run/other/metrics-00000001.jsonl"],
                             "metrics")
    assert [(c.generation, c.process, c.seq) for c in ordered] == sorted(keys)


def test_the_trainers_chunks_read_back_as_written(tmp_path):
    """RunRecorder's ChunkSink through fsspec's local file system (the code gcsfs runs for gs://): two
    writers, one after the other, with flushes in between, read back in order, and the newer run.json."""
    script = """
import sys
from trainer.clock import SystemClock
from trainer.metrics import RunRecorder
from elxpk_contract.records import Metric
first = int(sys.argv[2])
recorder = RunRecorder("file://" + sys.argv[1], SystemClock(), flush_s=3600)
for step in range(first, first + 5):
    recorder.metric(Metric(step=step, loss="0x1.0p+0", lr=0.1, step_time_s=0.1, examples=(step, step + 1),
                           slices=(0,), time=1.0))
    if step % 2:
        recorder.flush()
recorder.event("run_finished", first + 5)
recorder.close()
"""
    run_dir = tmp_path / "run"
    for first in (0, 3):  # the second process redoes steps 3 and 4, as a resume from a checkpoint does
        done = subprocess.run([sys.executable, "-c", script, str(run_dir), str(first)], capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
    run = load_run(run_dir)
    assert list(run.metrics.step) == [0, 1, 2, 3, 4, 3, 4, 5, 6, 7]
    assert [e.step for e in run.events] == [5, 8]
    assert sorted(p.parent.name for p in (run_dir / "records").glob("*/metrics-*.jsonl")) == \
        ["w000001-p00000"] * 3 + ["w000002-p00000"] * 3


def test_a_checkpoint_directory_holding_only_its_runs_records_is_still_one(tmp_path):
    """Before the first save, a checkpoint directory holds the progress record and the run's records that
    `workload create` renders inside it: `checkpoint inspect` takes it as an empty checkpoint directory, not
    as a wrong one; anything else there still is."""
    from elxpk.checkpoints.inspection import resolve
    from elxpk.errors import UsageError
    from elxpk_contract.progress_record import PROGRESS_FILE
    from elxpk_storage.run_records import RUN_DIR_INSIDE

    (tmp_path / RUN_DIR_INSIDE / "records").mkdir(parents=True)
    (tmp_path / PROGRESS_FILE).write_text("{}")
    assert str(resolve(str(tmp_path))) == str(tmp_path)
    (tmp_path / "notes").mkdir()
    try:
        resolve(str(tmp_path))
    except UsageError as exc:
        assert "holds no checkpoint step" in str(exc)
    else:
        raise AssertionError("a directory of other things was taken for a checkpoint directory")


def test_a_chunk_over_one_part_reads_whole_with_lines_across_the_part_boundaries(tmp_path):
    """A chunk is fetched CHUNK_PART_BYTES at a time (issue 51): lines cut by a part's end read whole."""
    from elxpk_storage.run_records import CHUNK_PART_BYTES

    lines, size = [], 0
    while size < 2.5 * CHUNK_PART_BYTES:
        lines.append(metric_line(len(lines)))
        size += len(lines[-1])
    chunk = tmp_path / "records" / "w000001-p00000" / "metrics-00000000.jsonl"
    chunk.parent.mkdir(parents=True)
    chunk.write_text("".join(lines) + '{"step": 1')  # ends in a torn line, as a damaged object does
    run = load_run(tmp_path)
    assert list(run.metrics.step) == list(range(len(lines))) and run.damaged_lines == 1


REPORT_PEAK = """
import resource, subprocess, sys
done = subprocess.run([sys.argv[1], "report", sys.argv[2]], capture_output=True, text=True, timeout=300)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode, (done.stderr.strip().splitlines() or [""])[-1])
"""


def _report_peak_kib(run_dir: Path) -> tuple[int, int, str]:
    elxpk = str(Path(sys.executable).parent / "elxpk")
    done = subprocess.run([sys.executable, "-c", REPORT_PEAK, elxpk, str(run_dir)], capture_output=True, text=True,
                          timeout=600, check=True)
    peak, code, line = done.stdout.split(" ", 2)
    return int(peak), int(code), line.strip()


def test_a_one_line_chunk_over_the_record_cap_is_refused_at_the_caps_memory(tmp_path):
    """Issue 51: `report` read a 300 MB one-line chunk whole before refusing it (743 MB at the peak). Here a
    64 MB one: refused with the cap's line, its peak memory within 32 MB of reading a small valid run's."""
    hostile = tmp_path / "hostile" / "records" / "w000001-p00000" / "metrics-00000000.jsonl"
    hostile.parent.mkdir(parents=True)
    with hostile.open("wb") as out:
        out.write(metric_line(0).encode())
        for _ in range(64):
            out.write(b"a" * (1 << 20))
    small = tmp_path / "small" / "records" / "w000001-p00000" / "metrics-00000000.jsonl"
    small.parent.mkdir(parents=True)
    small.write_text("".join(metric_line(s) for s in range(5)))
    base, _, _ = _report_peak_kib(tmp_path / "small")
    peak, code, line = _report_peak_kib(tmp_path / "hostile")
    assert code == 2 and line.endswith("metrics line 2 is over the 1.0 MiB a record may be"), line
    assert peak - base < 32 * 1024, (peak, base)


@given(st.integers(17, 240), st.integers(10**15, 10**16 - 1))  # 240: a local name's limit (gs:// takes 990)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_planted_writer_folder_with_a_huge_generation_never_makes_a_writers_names_too_long(digits, big):
    """Issue 51: a folder `w<990 digits>-p00000` made every later writer's chunk names too long (records lost).
    Past the widths a writer uses it is no writer's: passed over by the next writer and by the readers."""
    from elxpk_storage.run_records import MAX_GENERATION, ChunkWriter, parse_writer

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in (f"w{'9' * digits}-p00000", f"w{big}-p00000"):
            (root / "records" / name).mkdir(parents=True)
            (root / "records" / name / "notes.txt").write_text("planted")
        writer = ChunkWriter(f"file://{root}", 0)
        writer.put_chunk("metrics", metric_line(0).encode())
        (written,) = [p for p in (root / "records").glob("*/metrics-*.jsonl")]
        assert parse_writer(written.parent.name) == (1, 0) and len(written.name) < 40
        assert parse_writer(f"w{'9' * digits}-p00000") is None and parse_writer(f"w{MAX_GENERATION + 1}-p00000")
        assert list(load_run(root).metrics.step) == [0]

"""--check-data: grain_train_files is ArrayRecord holding records, on files array_record itself writes.

Local paths are real files; gs:// goes to tests/support/fake_gcs.py through STORAGE_EMULATOR_HOST (the
JSON API elxpk/cluster/api/gcs.py speaks; no real Cloud Storage here). The CLI runs as a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from array_record.python.array_record_module import ArrayRecordWriter

from elxpk.maxtext.data_check import INDEX_BYTES, SIGNATURE, check_data, grain_train_files, patterns
from tests.support.fake_gcs import FakeGcs

ELXPK = str(Path(sys.executable).with_name("elxpk"))
RUN = "python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml"


def write_records(path: Path, n: int, options: str = "group_size:1", size: int = 16) -> Path:
    writer = ArrayRecordWriter(str(path), options)
    for i in range(n):
        writer.write(i.to_bytes(4, "little") * (size // 4))
    writer.close()
    return path


@pytest.mark.parametrize("options", ["", "group_size:1", "group_size:100,brotli:6", "uncompressed"])
def test_the_signature_is_what_array_record_writes(tmp_path, options):
    assert write_records(tmp_path / "a.array_record", 3, options).read_bytes()[:64] == SIGNATURE


def test_local_files_with_records_pass(tmp_path):
    for i in range(3):
        write_records(tmp_path / f"train-{i}.array_record", 5)
    assert check_data(f"{tmp_path}/train-*.array_record") == []
    assert check_data(str(tmp_path / "train-1.array_record")) == []


@pytest.mark.parametrize(("content", "problem"), [
    (None, "holds no records"),
    (b"", "is empty"),
    (b"PAR1" + b"\0" * 100, "not an ArrayRecord file (no Riegeli signature in its first bytes)"),
    (b"hello world" * 20, "not an ArrayRecord file"),
])
def test_bad_local_files_are_one_line_each(tmp_path, content, problem):
    path = tmp_path / "train.array_record"
    if content is None:
        write_records(path, 0)
    else:
        path.write_bytes(content)
    (line,) = check_data(str(path))
    assert line.startswith(f"grain_train_files {path}: {path} ") and problem in line
    assert line.endswith("(--check-data)") and "\n" not in line


def test_the_last_match_is_checked_too(tmp_path):
    write_records(tmp_path / "a.array_record", 2)
    (tmp_path / "z.array_record").write_bytes(b"not records")
    (line,) = check_data(f"{tmp_path}/*.array_record")
    assert "z.array_record is not an ArrayRecord file" in line


def test_paths_that_match_nothing_or_a_directory(tmp_path):
    assert check_data(f"{tmp_path}/none-*.array_record")[0].endswith("matches no file; check the path (--check-data)")
    assert "is a directory" in check_data(str(tmp_path))[0]


def test_a_fifo_or_a_device_matched_by_the_pattern_is_refused_without_reading_it(tmp_path):
    os.mkfifo(tmp_path / "z.array_record")  # nothing ever writes to it: an open() for reading would block
    (line,) = check_data(f"{tmp_path}/*.array_record")
    assert "z.array_record is a FIFO (named pipe), not a regular file" in line
    assert "/dev/zero is a character device, not a regular file" in check_data("/dev/zero")[0]


def test_mixture_parts_and_weights():
    assert patterns("/d/a*,0.3;/d/b*,0.7") == ["/d/a*", "/d/b*"]
    assert patterns("/d/a,b*") == ["/d/a,b*"]


def test_the_grain_files_of_a_command():
    assert grain_train_files(f"{RUN} dataset_type=grain grain_train_files='/d/*.ar'") == "/d/*.ar"
    assert grain_train_files(f"{RUN} grain_train_files=/d/x") is None  # dataset_type synthetic: not read
    assert grain_train_files(f"{RUN} dataset_type=grain grain_train_files=$DATA") is None  # the shell decides
    assert grain_train_files("bash run.sh") is None


@pytest.fixture
def gcs(monkeypatch):
    server = FakeGcs().start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
    yield server
    server.stop()


def put(server: FakeGcs, name: str, data: bytes) -> None:
    server.objects[("bkt", name)] = (data, 1)


def test_gcs_objects_are_read_in_bounded_ranges(gcs, tmp_path):
    big = write_records(tmp_path / "big.array_record", 100_000, size=64).read_bytes()
    assert len(big) > INDEX_BYTES + (1 << 20)  # more than the check reads of it
    put(gcs, "data/train-0.array_record", big)
    put(gcs, "data/train-1.array_record", write_records(tmp_path / "s.array_record", 3).read_bytes())
    put(gcs, "data/other.txt", b"x")
    assert check_data("gs://bkt/data/train-*.array_record") == []
    assert gcs.range_reads and all(last - first < INDEX_BYTES for _, first, last in gcs.range_reads)


def test_gcs_problems(gcs, tmp_path):
    put(gcs, "d/empty.array_record", write_records(tmp_path / "e.array_record", 0).read_bytes())
    put(gcs, "d/text.array_record", b"hello" * 30)
    assert "holds no records" in check_data("gs://bkt/d/empty.array_record")[0]
    assert "not an ArrayRecord file" in check_data("gs://bkt/d/text.array_record")[0]
    assert check_data("gs://bkt/d/none-*")[0].endswith("matches no file; check the path (--check-data)")


def elxpk(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([ELXPK, *argv], capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})


def create_flags(files: str) -> list[str]:
    return ["workload", "create", "--workload", "w", "--tpu-type", "v5litepod-16", "--num-slices", "2", "--trainer",
            "maxtext", "--command", f"{RUN} dataset_type=grain grain_train_files={files} "
            "grain_use_elastic_iterator=true packing=false", "--dry-run"]


def test_create_check_data_refuses_bad_data_with_exit_2_and_writes_nothing(tmp_path):
    (tmp_path / "t.array_record").write_bytes(b"{}\n" * 40)
    out = tmp_path / "manifest.yaml"
    done = elxpk(*create_flags(str(tmp_path / "t.array_record")), "--check-data", "--output-manifest-file", str(out))
    assert done.returncode == 2 and done.stdout == "" and not out.exists()
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "not an ArrayRecord file" in errors[0] and "Traceback" not in done.stderr


def test_create_reads_no_data_without_the_flag_and_passes_with_good_data(tmp_path):
    assert elxpk(*create_flags(str(tmp_path / "missing-*"))).returncode == 0  # off by default
    write_records(tmp_path / "t.array_record", 4)
    done = elxpk(*create_flags(str(tmp_path / "t.array_record")), "--check-data")
    assert done.returncode == 0, done.stderr


def test_validate_check_data(tmp_path):
    write_records(tmp_path / "good.array_record", 4)
    manifest = tmp_path / "m.yaml"
    manifest.write_text(elxpk(*create_flags(str(tmp_path / "good.array_record"))).stdout)
    done = elxpk("workload", "validate", str(manifest), "--check-data")
    assert done.returncode == 0, done.stderr
    assert "ArrayRecord with records" in done.stderr
    manifest.write_text(elxpk(*create_flags(str(tmp_path / "gone.array_record"))).stdout)
    done = elxpk("workload", "validate", str(manifest), "--check-data")
    assert done.returncode == 2 and "matches no file" in done.stderr


def test_an_empty_gcs_object(gcs):
    put(gcs, "d/zero.array_record", b"")
    (line,) = check_data("gs://bkt/d/zero.array_record")
    assert "gs://bkt/d/zero.array_record is empty" in line

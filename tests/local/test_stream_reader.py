"""The streaming reader of run records (`read_records`, `read_text_lines`) against the whole-file reader it
replaced: for any bytes, the same records, the same torn-line count, or the same one-line refusal."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elxpk import bounded_read
from elxpk.json_lines import JsonLinesError, RecordLineError, decode_text, parse_lines, read_records
from elxpk.maxtext.metrics import MetricsFileError, parse_metrics, read_metrics
from elxpk_contract.event_records import parse_event
from elxpk_contract.record_fields import RecordError
from elxpk_contract.records import parse_metric

PROPERTY = settings(max_examples=200, derandomize=True, database=None, deadline=timedelta(seconds=10))

METRIC = b'{"step": 3, "loss": "0x1.8p+1", "lr": 0.1, "step_time_s": 0.5, "examples": [0, 8], "slices": [0], "time": 1.0}'
EVENT = b'{"event": "run_started", "time": 1.0, "step": 0, "slices": [0, 1]}'
PIECES = [METRIC, EVENT, b'{"step": -1}', b'{"step": 1, "lo', b"[1]", b"not json", b"", b" ", b"\xff", b"\0",
          b"\xc3\xa9", b"\xe2\x82", b'{"event": "nope", "time": 1}', b'"text"', b"{" * 3]


def whole_file(data: bytes, parse) -> tuple[str, object]:
    """What the reader did before it streamed: decode everything, split, parse every line, then type them."""
    try:
        text = decode_text(data)
    except ValueError as exc:
        return "refused", str(exc)
    try:
        lines = parse_lines(text, strict=True)
    except JsonLinesError as exc:
        return "refused", str(exc)
    out = []
    for number, record in zip(lines.line_numbers, lines.records, strict=True):
        try:
            out.append(parse(record))
        except RecordError as exc:
            return "refused", f"line {number}: {exc}"
    return "read", (out, lines.damaged_lines)


def streamed(path, parse) -> tuple[str, object]:
    try:
        return "read", read_records(path, parse)
    except (JsonLinesError, RecordLineError) as exc:
        return "refused", str(exc)


@PROPERTY
@given(st.lists(st.sampled_from(PIECES) | st.binary(max_size=12), max_size=12), st.booleans(),
       st.sampled_from([parse_metric, parse_event]))
def test_the_stream_reads_what_the_whole_file_reader_read(tmp_path_factory, pieces, newline_at_end, parse):
    data = b"\n".join(pieces) + (b"\n" if newline_at_end else b"")
    path = tmp_path_factory.mktemp("r") / "metrics.jsonl"
    path.write_bytes(data)
    assert streamed(path, parse) == whole_file(data, parse)


@PROPERTY
@given(st.binary(max_size=64) | st.text(max_size=32).map(lambda t: t.encode("utf-8", "surrogatepass")),
       st.integers(1, 7))
def test_utf8_and_nul_refusals_name_the_same_byte_whatever_the_chunking(tmp_path_factory, monkeypatch_chunk,
                                                                        data, chunk):
    """Characters cut by a chunk's end are carried into the next: the offsets are the whole file's."""
    monkeypatch_chunk(chunk)
    path = tmp_path_factory.mktemp("c") / "f"
    path.write_bytes(data)
    try:
        expected: object = decode_text(data).split("\n")
    except ValueError as exc:
        expected = str(exc)
    try:
        got: object = [line for _, line, _ in bounded_read.read_text_lines(
            path, limit=1000, line_limit=1000, expected="JSON lines")]
    except bounded_read.ReadRefused as exc:
        got = str(exc)
    assert got == expected


@pytest.fixture(scope="module")
def monkeypatch_chunk():
    saved = bounded_read._CHUNK

    def use(size: int) -> None:
        bounded_read._CHUNK = size

    yield use
    bounded_read._CHUNK = saved


def test_a_line_over_the_record_line_cap_is_refused_by_number(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(METRIC + b"\n" + b'{"x": "' + b"a" * bounded_read.RECORD_LINE_BYTES + b'"}\n')
    with pytest.raises(JsonLinesError, match=r"^line 2 is over the 1\.0 MiB a record may be$"):
        read_records(path, parse_metric)
    path.write_bytes(METRIC + b"\n" + b"a" * (bounded_read.RECORD_LINE_BYTES + 1))  # the last, unended piece
    with pytest.raises(JsonLinesError, match=r"^line 2 is over the 1\.0 MiB a record may be$"):
        read_records(path, parse_metric)


@PROPERTY
@given(st.lists(st.sampled_from([
    b'{"step": 1.0, "run_name": "r", "learning/loss": 2.5, "perf/step_time_seconds": 0.1}',
    b'{"step": 2, "run_name": "r", "learning/loss": NaN}', b'{"eval/loss": 1.0, "step": 2}', b'{"step": 1.5, "learning/loss": 1}',
    b'{"step": 3, "learning/loss": "x"}', b"[]", b"", b"cut {", b"\xff", b"\0"]), max_size=8), st.booleans())
def test_a_maxtext_metrics_file_streams_as_it_parsed_whole(tmp_path_factory, pieces, newline_at_end):
    data = b"\n".join(pieces) + (b"\n" if newline_at_end else b"")
    path = tmp_path_factory.mktemp("m") / "metrics.txt"
    path.write_bytes(data)
    try:
        expected: object = parse_metrics(decode_text(data), str(path))
    except MetricsFileError as exc:
        expected = str(exc)
    except ValueError as exc:
        expected = f"{path}: {exc}"
    try:
        got: object = read_metrics(path)
    except MetricsFileError as exc:
        got = str(exc)
    assert got == expected

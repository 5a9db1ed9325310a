"""Every record writer against its reader: anything a writer can write, the reader reads.

Random values for every field of every event kind, of the metric record, of run.json's extras and of the
progress record go through the real writers (trainer.metrics.RunRecorder, trainer.elastic.progress.ProgressWriter).
Each either refuses at the writer (RecordError: nothing written) or writes a file that the one reader
(elxpk.runs.rundir.load_run, elxpk_contract.progress_record.read_progress) reads back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from elxpk_contract.event_records import EVENTS
from elxpk_contract.limits import MAX_INDEX
from elxpk_contract.progress_record import Progress, read_progress
from elxpk_contract.record_fields import RecordError
from elxpk_contract.records import Metric
from tests.support.clock import ManualClock

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
HUGE = st.integers(min_value=-(2**80), max_value=2**80)
ints = st.one_of(st.sampled_from([0, 1, -1, MAX_INDEX, MAX_INDEX + 1, 10**23]), HUGE)
floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), ints)
texts = st.text(max_size=80)


def _values(hint) -> st.SearchStrategy:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return st.one_of(st.none(), _values(inner))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(_values(args[0]), max_size=4).map(tuple)
        return st.tuples(*(_values(a) for a in args))
    return {int: ints, float: floats, str: texts, bool: st.booleans()}.get(hint, st.dictionaries(texts, ints))


def _fields(cls, skip=()) -> st.SearchStrategy:
    hints = typing.get_type_hints(cls)
    return st.fixed_dictionaries({}, optional={f.name: _values(hints[f.name]) for f in dataclasses.fields(cls)
                                               if f.name not in skip})


@pytest.fixture(scope="module")
def clock(tmp_path_factory):
    """The writers' clock; it also carries the module's scratch directory (removed by pytest)."""
    clock = ManualClock(start=1_700_000_000.0)
    clock.scratch = tmp_path_factory.mktemp("writers")  # type: ignore[attr-defined]
    return clock


@SETTINGS
@given(name=st.sampled_from(sorted(EVENTS)), data=st.data())
@example(name="checkpoint_skipped", data=None)  # the stray folder of issue 21: a step no run reaches
def test_every_event_the_writer_writes_the_reader_reads(clock, name, data):
    from elxpk.runs.rundir import load_run
    from trainer.metrics import RunRecorder

    if data is None:
        step, details = 10**23, {"reason": "no digest"}
    else:
        step = data.draw(st.one_of(st.none(), ints))
        details = data.draw(_fields(EVENTS[name], skip=("time", "step", "source")))
    with tempfile.TemporaryDirectory() as tmp:
        recorder = RunRecorder(tmp, clock)
        recorder.metric({"step": 0, "loss": "0x1.0p+0", "lr": 0.1, "step_time_s": 0.1, "examples": [0, 4],
                         "slices": [0], "time": 1.0})
        try:
            recorder.event(name, step, **details)
        except RecordError:
            pass  # refused at the writer: nothing of it was written
        finally:
            recorder.close()
        run = load_run(tmp)  # a UsageError here is a record the writer wrote and its reader refuses
        assert len(run.events) <= 1


@SETTINGS
@given(fields=_fields(Metric))
def test_every_metric_the_writer_writes_the_reader_reads(clock, fields):
    from elxpk.runs.rundir import load_run

    with _refused_or_written(clock) as (recorder, tmp):
        recorder.metric(json.loads(json.dumps(fields)) if _jsonable(fields) else fields)
    assert len(load_run(tmp).metrics) <= 1


@SETTINGS
@given(extra=st.fixed_dictionaries({}, optional={k: st.dictionaries(texts, st.one_of(ints, floats, texts))
                                                 for k in ("model", "topology", "memory")}))
def test_every_run_json_the_writer_writes_the_reader_reads(clock, extra):
    from elxpk.runs.rundir import load_info
    from elxpk_contract.settings import TrainerConfig

    with _refused_or_written(clock) as (recorder, tmp):
        recorder.write_run_json(TrainerConfig(run_dir=str(tmp)), extra)
    load_info(tmp)


@SETTINGS
@given(fields=_fields(Progress))
def test_every_progress_record_the_writer_writes_the_reader_reads(clock, fields):
    from trainer.elastic.progress import ProgressWriter

    with tempfile.TemporaryDirectory() as tmp:
        writer = ProgressWriter(tmp, clock)
        try:
            writer.progress = dataclasses.replace(writer.progress, **fields)
            writer.write()
        except RecordError:
            pass
        path = Path(tmp) / "elxpk-progress.json"
        if path.exists():
            read_progress(path.read_text(encoding="utf-8"))


@contextlib.contextmanager
def _refused_or_written(clock) -> Iterator[tuple[Any, Path]]:
    """A RunRecorder in a directory that outlives it (for the reader): a RecordError from the writer is a
    refusal, nothing written; anything else propagates."""
    from trainer.metrics import RunRecorder

    tmp = Path(tempfile.mkdtemp(dir=clock.scratch))
    recorder = RunRecorder(tmp, clock)
    try:
        yield recorder, tmp
    except RecordError:
        pass
    finally:
        recorder.close()


def _jsonable(value) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True

"""Every flag table's record (elxpk/flag_records.py) against the rows its command reads: the same names in
the same order, each typed as its row's kind reads (a record left behind by a changed table fails here, and
mypy checks every read of it)."""

from __future__ import annotations

import pytest

from elxpk.checkpoints.flags import INSPECT, InspectFlags
from elxpk.cli import translate, workload_list, workload_status, workload_wait
from elxpk.cluster.verbs import verb_flags
from elxpk.create.flag_values import _ROWS as CREATE_ROWS
from elxpk.create.flags import BY_NAME as CREATE_BY_NAME
from elxpk.create.flags import of_command
from elxpk.create.records import CreateFlags, ValidateFlags
from elxpk.flag_records import Record, read_record
from elxpk.flag_rows import BOOL, DURATION, FLOAT, INT, LIST, SIZE, TEXT, Flag
from elxpk.local.flags import ROWS as LOCAL_ROWS
from elxpk.local.flags import LocalFlags
from elxpk.notify import flags as notify_flags
from elxpk.output_formats import OUTPUT_ROWS
from elxpk.plan import flags as plan_flags
from elxpk.runs.flags import COMPARE, REPORT, CompareFlags, ReportFlags

RECORDS: list[tuple[type[Record], tuple[Flag, ...]]] = [
    (CreateFlags, CREATE_ROWS),
    (ValidateFlags, (*of_command("validate"), OUTPUT_ROWS["run"])),
    (translate.Printed, (CREATE_BY_NAME["workload"], CREATE_BY_NAME["no_pathways"])),
    (LocalFlags, LOCAL_ROWS),
    (plan_flags.PlanValues, plan_flags.READ),
    (verb_flags.StatusFlags, workload_status.ROWS),
    (verb_flags.ListFlags, workload_list.ROWS),
    (verb_flags.DeleteFlags, verb_flags.DELETE),
    (verb_flags.LogsFlags, verb_flags.LOGS),
    (verb_flags.WaitFlags, workload_wait.ROWS),
    (verb_flags.KillSliceFlags, verb_flags.KILL_SLICE),
    (verb_flags.EventsFlags, (*verb_flags.EVENTS, OUTPUT_ROWS["run"])),
    (verb_flags.JobInspectFlags, verb_flags.JOB_INSPECT),
    (notify_flags.NotifyFlags, notify_flags.ROWS),
    (InspectFlags, (*INSPECT, OUTPUT_ROWS["run"])),
    (ReportFlags, (OUTPUT_ROWS["run"], *REPORT)),
    (CompareFlags, (OUTPUT_ROWS["run"], *COMPARE)),
]
# What each kind reads as (flag_rows.Flag.read): a number's text as the number, a duration in seconds.
_TYPES = {TEXT: "str", INT: "int", FLOAT: "float", DURATION: "float", SIZE: "int", BOOL: "bool"}
_LISTS = ("Sequence[str]", "list[str]", "tuple[str, ...]")


@pytest.mark.parametrize(("record", "rows"), RECORDS, ids=[r.__name__ for r, _ in RECORDS])
def test_each_record_declares_its_rows_in_order_typed_by_kind(record, rows):
    assert record.fields() == tuple(row.name for row in rows)
    for row in rows:
        declared = record.__annotations__[row.name]
        kind = declared.removesuffix(" | None")
        assert kind in (_LISTS if row.kind == LIST else (_TYPES[row.kind],)), (row.name, declared)
        if row.default is None and row.kind != BOOL:  # nothing given reads as None
            assert declared.endswith(" | None"), (row.name, declared)


def test_a_record_refuses_rows_it_does_not_declare():
    rows = (*verb_flags.DELETE, Flag("extra", TEXT, "", commands=("delete",)))
    with pytest.raises(TypeError, match="DeleteFlags declares"):
        read_record(verb_flags.DeleteFlags, rows, {})


def test_a_record_is_read_only():
    record, _ = read_record(verb_flags.DeleteFlags, verb_flags.DELETE, {"yes": True})
    assert (record.all, record.yes) == (False, True)
    with pytest.raises(AttributeError):
        record.yes = False

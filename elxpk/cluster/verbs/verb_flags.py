"""The flags of the follow-up verbs (`workload status|list|delete|logs|wait|kill-slice|events`, and gcluster's `job inspect`), declared once
as rows (elxpk/flag_rows.py), and the rules between them: pure functions over the typed values.

elxpk/cli/workload_*.py get each verb's Typer options from its tuple here (elxpk/cli/options.py `with_flags`: help,
default and bounds from the rows), and `read` turns what was typed into typed values with `flag_rows.read_all`,
so a bad value gets the same one line as in `plan` or `local run`, and every problem of a command line is
shown at once (exit 2, before any I/O), as the verb's record (`StatusFlags`, `KillSliceFlags`, ...: one typed
attribute per row the verb reads, elxpk/flag_records.py). Standard library, elxpk.flag_rows and
elxpk.flag_records only: read on every start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from elxpk.errors import UsageError
from elxpk.flag_records import R, Record, read_record
from elxpk.flag_rows import BOOL, DURATION, INT, OUTPUT, TEXT, Flag, docs_table, seed_row

KILL_MODES = ("delete", "evict", "exit")  # how kill-slice takes a slice down (elxpk/cluster/verbs/soak.py)
WAIT_STATES = ("completed", "running")  # what `workload wait --for` waits for (elxpk/cluster/verbs/ops.py wait_for)
RANDOM_SLICE = "random"  # kill-slice --slice random: a new draw each round
# 128 + a signal number, as a shell and the kubelet report a signal death: the only exit codes a container
# can be made to die with from outside.
SIGNAL_CODES = range(129, 160)

YES = Flag("yes", BOOL, "Do not ask for confirmation.", default=False, short="-y", commands=("delete", "kill-slice"))

STATUS: tuple[Flag, ...] = (
    Flag("why", BOOL, "Why it is not running: Kueue's verdict (quota, admission checks, eviction), the "
         "scheduler's and kubelet's (node pools, TPU chips, taints, image pulls, crash loops), each with the flag "
         "or command that fixes it.", default=False, commands=("status",)),
    Flag("stuck_after", DURATION, "Show one line of why when Queued, Admitted but not running, or Restarting "
         "for longer than this.", default="2m", commands=("status",)),
    Flag("watch", BOOL, "A live view kept current by the API's watch, until the workload succeeds (exit 0) or "
         "fails (exit 1), or Ctrl-C (130); with -o json, one JSON object per change.", default=False, short="-w",
         commands=("status",)),
)

LIST: tuple[Flag, ...] = (
    Flag("filter", TEXT, "Only names containing this text.", commands=("list",)),
    Flag("regex", BOOL, "Treat --filter as a regular expression.", default=False, commands=("list",)),
    Flag("status", TEXT, "Only this state: Queued, Admitted, Running, Degraded, Restarting, Succeeded or Failed.",
         commands=("list",)),
)

DELETE: tuple[Flag, ...] = (
    Flag("all", BOOL, "Delete every workload in the namespace.", default=False, commands=("delete",)),
    YES,
)

LOGS: tuple[Flag, ...] = (
    Flag("head", BOOL, "The Pathways head (the default when there is one).", default=False, commands=("logs",)),
    Flag("slice", INT, "Slice index K.", low=0, commands=("logs",), fix="a slice index: 0, 1, ..."),
    Flag("vm", INT, "VM index I within the slice (default 0).", low=0, commands=("logs",),
         fix="a VM index within the slice: 0, 1, ..."),
    Flag("container", TEXT, "Container (default: the main one).", short="-c", commands=("logs",)),
    Flag("follow", BOOL, "Stream new lines until the pod ends.", default=False, short="-f", commands=("logs",)),
    Flag("tail", INT, "Only the last N lines.", low=0, commands=("logs",), fix="a count of lines"),
    Flag("previous", BOOL, "The last terminated container's log (after a restart in place: why it exited).",
         default=False, short="-p", commands=("logs",)),
)

WAIT: tuple[Flag, ...] = (
    Flag("until", TEXT, "completed or running.", default="completed", choices=WAIT_STATES, spelling="--for",
         commands=("wait",)),
    Flag("timeout", DURATION, "Give up after this long (90s, 2h, 3d); exit 124.", default_text="no limit",
         commands=("wait",)),
    Flag("poll", DURATION, "Seconds between status checks.", default="5s", above=0, commands=("wait",)),
)

KILL_SLICE: tuple[Flag, ...] = (
    Flag("slice", TEXT, "Slice index K to kill, or random (a new draw each round).", metavar="K|random",
         required="give a slice index (0, 1, ...) or random", commands=("kill-slice",)),
    Flag("vm", INT, "Only VM I of the slice (--mode delete, one round).", low=0, commands=("kill-slice",),
         fix="a VM index within the slice: 0, 1, ..."),
    Flag("mode", TEXT, "delete: force-delete the pods (a lost VM); evict: the Eviction API (a drain); exit: the "
         "trainer's container dies of a signal through exec.", default="delete", choices=KILL_MODES,
         commands=("kill-slice",)),
    Flag("exit_code", INT, "With --mode exit: the code, 128 + a signal (137 SIGKILL, 143 SIGTERM).", default=143,
         low=SIGNAL_CODES.start, high=SIGNAL_CODES.stop - 1, commands=("kill-slice",),
         fix="128 + a signal; a container can only be made to die of a signal from outside"),
    Flag("repeat", INT, "Soak test: this many rounds, each watched to recovery, then a summary.", default=1, low=1,
         commands=("kill-slice",), fix="rounds"),
    Flag("every", DURATION, "With --repeat: time from one kill to the next.", default="10m",
         commands=("kill-slice",)),
    seed_row("Seed of --slice random (a soak run repeats).", commands=("kill-slice",)),
    YES,
    Flag("watch", BOOL, "Follow the slice until it runs again; report timings.", default=False,
         commands=("kill-slice",)),
    Flag("timeout", DURATION, "With --watch: give up after this long.", default="30m", above=0, commands=("kill-slice",)),
    Flag("poll", DURATION, "With --watch: time between checks.", default="2s", above=0, commands=("kill-slice",)),
)

EVENTS: tuple[Flag, ...] = (
    Flag("watch", BOOL, "Keep following (the watch API) until the workload finishes.", default=False, short="-w",
         commands=("events",)),
    Flag("record", TEXT, "Append new incidents to this JSONL file, local or gs://BUCKET/OBJECT; incidents already "
         "there are skipped, so the history outlives the pods.", commands=("events",)),
)

# `job inspect NAME` (gcluster's verb): the workload as gcluster spells it, and the file of the diagnosis.
JOB_INSPECT: tuple[Flag, ...] = (
    Flag("name_option", TEXT, "The same, as gcluster spells it.", spelling="--name", short="-n",
         commands=("job inspect",)),
    Flag("out", TEXT, "The file to write (replaced atomically).", default_text="NAME-inspect.txt here", path=OUTPUT,
         commands=("job inspect",)),
)



# Each verb's record: the rows it reads, in order (its table, then what it reads besides: -o's row,
# --chip-hour-price); tests/test_flag_records.py holds each to those rows. A duration is in seconds.
class StatusFlags(Record):
    why: bool
    stuck_after: float
    watch: bool
    chip_hour_price: float | None
    output: str


class ListFlags(Record):
    filter: str | None
    regex: bool
    status: str | None
    output: str


class DeleteFlags(Record):
    all: bool
    yes: bool


class LogsFlags(Record):
    head: bool
    slice: int | None
    vm: int | None
    container: str | None
    follow: bool
    tail: int | None
    previous: bool


class WaitFlags(Record):
    until: str
    timeout: float | None
    poll: float
    output: str


class KillSliceFlags(Record):
    slice: str | None  # K or `random`, as typed: kill_slice_index reads it
    vm: int | None
    mode: str
    exit_code: int
    repeat: int
    every: float
    seed: int | None
    yes: bool
    watch: bool
    timeout: float
    poll: float


class EventsFlags(Record):
    watch: bool
    record: str | None
    output: str


class JobInspectFlags(Record):
    name_option: str | None
    out: str | None


Rule = Callable[[Any], list[str]]  # over the verb's record


def read(record: type[R], rows: tuple[Flag, ...], given: Mapping[str, Any], *rules: Rule,
         problems: tuple[str, ...] = ()) -> R:
    """Every row's typed value (`flag_rows.read_all`: kind, bounds, choices, default) as `record`, then a
    required row's absence and each rule over the typed values; any problem (`problems`: the command's own,
    e.g. -o) is UsageError naming every one at once. A poll or timeout of 0 s (a spin, or giving up before
    looking) is refused by its row (`above=0`)."""
    values, found = read_record(record, rows, dict(given))
    found += problems
    found += [f"{row.flag}: required; {row.required}" for row in rows if row.required and given.get(row.name) is None]
    for rule in rules:  # a refused value reads as its row's default, so every value is typed here
        found += rule(values)
    if found:
        raise UsageError(*found)
    return values


def status_rules(output: str) -> Rule:
    """`status`: --watch is a stream, which -o yaml and --why's one-off report are not."""
    def rule(values: StatusFlags) -> list[str]:
        problems = []
        if values.watch and output == "yaml":
            problems.append("-o yaml --watch: a stream of changes is -o json (one object a line) or the table view")
        if values.watch and values.why:
            problems.append("--why --watch: the live view shows the why line already; drop --why, or run "
                            "`status --why` once")
        return problems
    return rule


def list_state(state: str | None, states: tuple[str, ...]) -> tuple[str | None, list[str]]:
    """`list --status`: the state of `states` it names in any case; else one problem naming them."""
    if state is None:
        return None, []
    wanted = next((s for s in states if s.lower() == state.lower()), None)
    return wanted, ([] if wanted else [f"--status {state}: use one of {', '.join(states)}"])


def list_matcher(values: ListFlags) -> tuple[Any, list[str]]:
    """`list --filter [--regex]`: the compiled pattern (None without --filter), or one problem."""
    import re  # lazy: only `list --filter` compiles a pattern

    text = values.filter
    if text is None:
        return None, []
    try:
        return re.compile(text if values.regex else re.escape(text)), []
    except re.error as exc:
        return None, [f"--filter {text!r}: not a valid regular expression ({exc})"]


def delete_rule(name: str | None) -> Rule:
    """`delete`: NAME or --all, exactly one."""
    def rule(values: DeleteFlags) -> list[str]:
        return ["give a workload NAME or --all (not both)"] if (name is None) == (not values.all) else []
    return rule


def logs_rule(values: LogsFlags) -> list[str]:
    """`logs`: one pod, and a log that can be followed."""
    problems = []
    if values.previous and values.follow:
        problems.append("--previous and --follow: a terminated container's log does not grow; give one of them")
    if values.head and (values.slice is not None or values.vm is not None):
        problems.append("--head and --slice/--vm select different pods: give one of them")
    return problems


# kill-slice --slice K read as a number (the one reader of rows); `random` is taken before it.
_SLICE_INDEX = Flag("slice", INT, "", low=0, fix=f"a slice index, or {RANDOM_SLICE}")


def kill_slice_index(text: str) -> int | None:
    """--slice K as an index, None for random; UsageError for anything else."""
    if text == RANDOM_SLICE:
        return None
    index, problem = _SLICE_INDEX.read(text)
    if problem:
        raise UsageError(problem)
    return int(index)


def is_soak(repeat: int, mode: str, random_slice: bool) -> bool:
    """Rounds watched to recovery (elxpk/cluster/verbs/soak.py) rather than one force-delete of a given slice."""
    return repeat > 1 or mode != "delete" or random_slice


def kill_slice_rule(values: KillSliceFlags) -> list[str]:
    """`kill-slice`: --slice K or random; --vm only for one force-delete of a given slice."""
    problems = []
    try:
        if values.slice is not None:  # absent: the row's `required` says so
            kill_slice_index(values.slice)
    except UsageError as exc:
        problems += exc.messages
    if values.vm is not None and is_soak(values.repeat, values.mode, values.slice == RANDOM_SLICE):
        problems.append("--vm: only with --mode delete, one round and a given --slice K; drop --vm to take "
                        "the whole slice down")
    return problems


# docs/cluster.md's tables of the verbs' own flags (besides the cluster flags, -o, and what other tables
# declare: --chip-hour-price in elxpk/accelerators.py, events' notifications in elxpk/notify/flags.py).
DOCS = (("workload status", STATUS), ("workload list", LIST), ("workload delete", DELETE), ("workload logs", LOGS),
        ("workload wait", WAIT), ("workload kill-slice", KILL_SLICE), ("workload events", EVENTS))
BEGIN = "<!-- verb-flag-table:begin (generated from elxpk/cluster/verbs/verb_flags.py) -->"
END = "<!-- verb-flag-table:end -->"


def embed(page: str) -> str:
    """`page` with the text between BEGIN and END replaced by one table per verb."""
    head, found, rest = page.partition(BEGIN)
    _, found_end, tail = rest.partition(END)
    if not found or not found_end:
        raise ValueError(f"the page has no {BEGIN!r} ... {END!r} block")
    tables = "\n".join(f"`{verb}`:\n\n{docs_table(rows)}" for verb, rows in DOCS)
    return f"{head}{BEGIN}\n{tables}{END}{tail}"

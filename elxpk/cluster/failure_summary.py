"""`workload events`' closing lines: the failures grouped by cause, and whether they came with no progress.

Pure (incidents and the progress record in, lines out). A failure is a container exit with a non-zero
code; its cause is the code's name in the trainer's exit-code table (slice_lost, stalled, user_error, ...),
or `exit N` for a code outside it (137 after SIGKILL or the OOM killer). With the trainer's progress
record (CHECKPOINT_DIR/elxpk-progress.json, `workload status` reads the same), the exits after its last
completed step are failures with no progress: two or more of one cause read "no progress since step S".
That is what `--elastic-stop-on-repeat` counts inside one trainer process; this sees it across the
group restarts that a cluster adds on top.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from elxpk.cluster.incidents import Incident
from elxpk.cluster.status import parse_time
from elxpk_contract.exit_codes import BY_CODE


def cause_name(code: int) -> str:
    known = BY_CODE.get(code)
    return known.name if known is not None else f"exit {code}"


def _ranked(counts: Counter) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def summary_lines(incidents: Sequence[Incident], progress: dict | None) -> list[str]:
    exits = [i for i in incidents if i.kind == "exit" and i.exit_code]
    if not exits:
        return []
    counts = Counter(cause_name(i.exit_code or 0) for i in exits)
    lines = ["failures by cause: " + ", ".join(f"{cause} {n}" for cause, n in _ranked(counts))]
    if progress is None:
        return lines
    last_step = progress.get("step_time")
    stalled = Counter(cause_name(i.exit_code or 0) for i in exits
                      if last_step is None or (parse_time(i.time) or 0.0) > last_step)
    for cause, n in _ranked(stalled):
        if n >= 2:
            lines.append(f"no progress since step {progress.get('steps_done', 0)}: {n} {cause} failures since "
                         "the trainer's last completed step")
    return lines

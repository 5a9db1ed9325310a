"""What `elxpk compare` and `elxpk report` read: an elxpk run directory, or a MaxText `metrics_file`.

`load_source(path, flag=...)` returns a `Run` (elxpk/runs/rundir.py) for a directory with the bundled
trainer's metrics.jsonl, and a `MaxTextMetrics` (elxpk/maxtext/metrics.py) for a MaxText metrics file or a
directory that holds exactly one. MaxText names its metrics file freely (`metrics_file=PATH`), so a
directory is searched for files whose first record is a MaxText metrics line. Every problem is one
UsageError line naming `flag`.
"""

from __future__ import annotations

from pathlib import Path

from elxpk.errors import UsageError
from elxpk.maxtext.metrics import MaxTextMetrics, MetricsFileError, looks_like_maxtext_metrics, read_metrics
from elxpk.runs.rundir import METRICS, Run, is_chunked, load_run

_SCANNED = 200  # directory entries looked at for a MaxText metrics file: a run directory holds a few


def load_source(path: str | Path, *, flag: str = "RUN_DIR") -> Run | MaxTextMetrics:
    """The run at `path`: a run directory (local or gs://), a MaxText metrics file, or a directory holding one."""
    if is_chunked(path):
        return load_run(path, flag=flag)
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{flag}: {p} does not exist; pass a run directory (one with {METRICS}) or a MaxText "
                         f"metrics_file")
    if p.is_file():
        if p.name == METRICS and not looks_like_maxtext_metrics(p):  # the bundled trainer's own file
            return load_run(p.parent, flag=flag)
        return _maxtext(p, flag)
    if p.is_dir() and not (p / METRICS).exists():  # one that exists but is not a file: load_run says what
        found = maxtext_files(p, flag)
        if len(found) == 1:
            return _maxtext(found[0], flag)
        if len(found) > 1:
            names = ", ".join(f.name for f in found[:4])
            raise UsageError(f"{flag}: {p} holds {len(found)} MaxText metrics files ({names}); pass one of them")
        raise UsageError(f"{flag}: {p} has no {METRICS} and no MaxText metrics_file; pass the --run-dir of "
                         f"`elxpk local run`, the trainer's run_dir, or MaxText's metrics_file")
    if p.is_dir() and (p / METRICS).is_file() and looks_like_maxtext_metrics(p / METRICS):  # MaxText run with metrics_file=.../metrics.jsonl
        return _maxtext(p / METRICS, flag)
    return load_run(p, flag=flag)


def maxtext_files(directory: Path, flag: str = "RUN_DIR") -> list[Path]:
    """The MaxText metrics files directly in `directory` (not below it), by name."""
    try:
        entries = sorted(directory.iterdir())[:_SCANNED]
    except OSError as exc:
        raise UsageError(f"{flag}: {directory} cannot be listed ({exc.strerror or exc})") from None
    return [e for e in entries if looks_like_maxtext_metrics(e)]


def _maxtext(path: Path, flag: str) -> MaxTextMetrics:
    try:
        return read_metrics(path)
    except MetricsFileError as exc:
        raise UsageError(f"{flag}: {exc}") from None

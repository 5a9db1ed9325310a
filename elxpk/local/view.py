"""Showing RunProgress: a Rich live view on a terminal, plain event lines otherwise (CI, pipes)."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, TextIO

from elxpk.local.progress import RunProgress

if TYPE_CHECKING:
    from rich.live import Live

_HEALTH_STYLE = {"healthy": "green", "idle": "yellow", "restarting": "yellow", "lost": "bold red", "sick": "bold red"}
_SHOWN_LINES = 8


class PlainView(AbstractContextManager):
    """One line per event, plus the step and loss at every tenth of the run."""

    def __init__(self, progress: RunProgress, out: TextIO | None = None) -> None:
        self.progress = progress
        self.out = out or sys.stdout
        self._every = max(1, progress.total_steps // 10)
        self._shown = 0  # the highest tenth mark printed: a rewind re-executes steps, not their lines
        progress.listeners.append(self._line)

    def _line(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def observe(self, kind: str, record: dict) -> None:
        self.progress.observe(kind, record)
        step = record.get("step") if kind == "metric" else None
        if not isinstance(step, int) or step + 1 <= self._shown:
            return
        if (step + 1) % self._every == 0 or step + 1 == self.progress.total_steps:
            self._shown = step + 1
            self._line(self.progress.status_line())

    def __exit__(self, *exc) -> None:
        return None


class LiveView(AbstractContextManager):
    """A progress bar with the loss, a health row per slice and the latest event lines."""

    def __init__(self, progress: RunProgress, console=None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = progress
        self.console = console or Console()
        self._bar = Progress(
            TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TextColumn("loss {task.fields[loss]}"),
            TextColumn("{task.fields[speed]}"), TimeElapsedColumn(), console=self.console,
        )
        self._task = self._bar.add_task("train", total=progress.total_steps, loss="-", speed="")
        self._live: Live | None = None

    def __rich__(self):
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        health = Table.grid(padding=(0, 2))
        health.add_row(*[
            Text(f"slice {s}: {state}", style=_HEALTH_STYLE.get(state, "")) for s, state in self.progress.health.items()
        ])
        events = [Text(line) for line in self.progress.lines[-_SHOWN_LINES:]]
        phase = [Text(f"{self.progress.phase} ...", style="cyan")] if self.progress.phase else []
        return Group(self._bar, *phase, health, *events)

    def observe(self, kind: str, record: dict) -> None:
        self.progress.observe(kind, record)
        if kind == "metric" and self.progress.step is not None:
            loss = "-" if self.progress.loss is None else f"{self.progress.loss:.4f}"
            self._bar.update(self._task, completed=self.progress.step + 1, loss=loss, speed=self.progress.speed_text())

    def __enter__(self) -> LiveView:
        from rich.live import Live

        self._live = Live(self, console=self.console, refresh_per_second=8, transient=False)
        self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.refresh()
            self._live.__exit__(*exc)


def make_view(progress: RunProgress, live: bool | None, out: TextIO | None = None):
    """The live view on a terminal (or when asked for), plain lines otherwise."""
    stream = out or sys.stdout
    if live is None:
        live = stream.isatty()
    if live:
        from rich.console import Console

        return LiveView(progress, Console(file=stream))
    return PlainView(progress, stream)

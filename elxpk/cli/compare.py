"""`elxpk compare RUN_A RUN_B`: per-step loss bits and example-id accounting; exit 1 on a mismatch.

Either side may be a MaxText metrics_file (or a directory holding one): losses are compared, and what a
MaxText file cannot show (exactly-once data) is printed as not checked.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from elxpk.cli.options import NO_FLAGS, RunOutput, with_flags
from elxpk.errors import CheckFailed, UsageError
from elxpk.flag_records import read_record
from elxpk.output_formats import OUTPUT_ROWS
from elxpk.runs.flags import COMPARE, CompareFlags
from elxpk.shown import shown


@with_flags("compare", COMPARE)
def compare(
    run_a: Annotated[str, typer.Argument(help="The reference run: a run directory (local or gs://), or a MaxText "
                                         "metrics_file (or a directory holding one).")],
    run_b: Annotated[str, typer.Argument(help="The run to check against it (the same kinds).")],
    flags: Mapping[str, Any] = NO_FLAGS,
    output: RunOutput = "text",
) -> None:
    """Fail (exit 1) when losses diverge beyond --rtol, or either run repeats or skips an example."""
    from elxpk.outfile import output_problem
    from elxpk.runs.compare import Series, compare_runs, render_text, settings_differ
    from elxpk.runs.sources import load_source

    values, problems = read_record(CompareFlags, (OUTPUT_ROWS["run"], *COMPARE),  # -o with the rest
                                   {**flags, "output": output})
    rtol, png = values.rtol, None if values.png is None else Path(values.png)
    if png is not None and (problem := output_problem(png, "--png", suffixes=(".png",), example="compare.png")):
        problems.append(problem)  # checked with the rest, before anything is printed or written
    runs, infos = [], []
    for path, flag in ((run_a, "RUN_A"), (run_b, "RUN_B")):
        try:
            source = load_source(path, flag=flag)
            # run.json's settings, to name those that differ: the fields alone, not the run that holds them.
            infos.append(getattr(getattr(source, "info", None), "fingerprint_fields", None))
            runs.append(Series.of(source))  # the steps that count: the rest is let go, at once
            del source  # a run at the record caps is hundreds of MB: not kept while the other one is read
        except UsageError as exc:
            problems.extend(exc.messages)
    if problems:
        raise UsageError(*problems)
    fmt = values.output
    a, b = runs
    result = dataclasses.replace(compare_runs(a, b, rtol=rtol), settings_differ=settings_differ(*infos))
    if png is not None:
        from elxpk.runs.plots import write_compare_png

        write_compare_png(result, png)
    if fmt == "json":
        typer.echo(json.dumps(result.to_dict(), indent=2))
    else:
        for line in render_text(result):
            typer.echo(shown(line))  # a run record (gs://, others write it): controls shown
    failures = result.failures()
    if failures:
        differ = (f"; their settings differ: {', '.join(name for name, _, _ in result.settings_differ)}"
                  if result.settings_differ else "")
        raise CheckFailed(f"runs differ: {failures[0]}{differ}")


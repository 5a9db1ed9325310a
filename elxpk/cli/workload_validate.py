"""`elxpk workload validate FILE...`: check JobSet manifests offline, as the cluster would at create time.

For CI users who render with other tools (xpk, kustomize, helm): the vendored CRD schema (strict), the
JobSet webhook's and the API server's admission rules, and the core pod schema and batch/v1 Job rules for
every replicatedJob's template. No cluster, no credentials. See elxpk/admission/files.py. Its flags are
rows of the launcher's flag table (elxpk/create/flags.py), shared with `workload create`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Annotated, Any

import typer

from elxpk.cli import options
from elxpk.errors import CheckFailed

# The labels of the lines that are elxpk's own findings, not the cluster's (tests/realcluster leaves them out).
BUDGETS = "timeouts and budgets: "
TRAINER = "the trainer refuses at its start: "

Files = Annotated[list[str], typer.Argument(
    help="YAML manifests (several documents each allowed); - reads stdin.", show_default=False,
    metavar="FILE...")]


@options.with_flags("validate")
def validate(files: Files, flags: Mapping[str, Any] = options.NO_FLAGS, output: options.RunOutput = "text") -> None:
    """Check manifests offline against the JobSet CRD, JobSet's admission rules and the core Job and pod
    schemas: one line per violation (FILE: PATH: message; `-o json`: one object), exit 1 if any, 0 when all
    pass. What the bundled trainer in a JobSet refuses at its start is a violation too. Each JobSet's
    timeouts and restart budgets are checked too (grace period, elastic timeout, stall timeout, retries
    against backoffLimit and maxRestarts; docs/launcher.md), against the times given."""
    from elxpk.admission.files import validate_files
    from elxpk.create.budget_checks import jobset_budget_findings, read_times
    from elxpk.create.flags import of_command
    from elxpk.create.records import ValidateFlags
    from elxpk.create.trainer_refusals import trainer_problems
    from elxpk.errors import UsageError
    from elxpk.flag_records import read_record
    from elxpk.output_formats import OUTPUT_ROWS

    # Each row read as `workload create` reads it (the one reader: a bad --step-time is the same line); -o with
    # them, so a bad format is one more line among the problems.
    values, problems = read_record(ValidateFlags, (*of_command("validate"), OUTPUT_ROWS["run"]),
                                   {**flags, "output": output})
    times, run_problems = read_times(values, flags)
    problems += run_problems
    if problems:
        raise UsageError(*problems)

    def findings(jobset: dict) -> tuple[list[str], list[str]]:
        """The stages beyond admission: the timeouts and budgets, then what the trainer refuses at its start."""
        errors, warnings = jobset_budget_findings(jobset, times)
        return ([f"{BUDGETS}{line}" for line in errors]
                + [f"{TRAINER}{path}: {message}" for path, message in trainer_problems(jobset, by_env=True)], warnings)

    report = validate_files(list(files), findings)
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    checked = report.documents - report.skipped
    if values.output == "json":  # one object on stdout, whatever the verdict; the exit code as in text
        import json

        print(json.dumps({"ok": not report.lines, "files": list(files), "documents": report.documents,
                          "checked": checked, "skipped": report.skipped, "violations": report.lines,
                          "elxpk_findings": report.budget_lines, "warnings": report.warnings,
                          "notes": report.notes}, indent=2))
    else:
        for line in report.lines:
            print(line)
    if values.check_data:
        _check_data(list(files))
    if report.lines:
        why = "the cluster would refuse them"
        if report.budget_lines:
            why += (f" ({report.budget_lines} of them: timeouts and budgets that cannot work together, or settings "
                    "the trainer refuses at its start)")
        raise CheckFailed(f"{len(report.lines)} violation(s) in {report.documents} document(s); {why}")
    if values.output == "json":
        return
    skipped = f"; {report.skipped} skipped (no schema known to elxpk)" if report.skipped else ""
    print(f"OK: {checked} document(s) in {len(files)} file(s) pass the JobSet schema, admission and "
          f"Job rules{skipped}")



def _check_data(files: list[str]) -> None:
    """--check-data: every MaxText command's grain_train_files is ArrayRecord with records (exit 2 if not)."""
    from elxpk.admission.files import read_documents
    from elxpk.errors import UsageError
    from elxpk.maxtext.data_check import check_commands, manifest_commands

    if "-" in files:  # validate_files has read stdin already
        print("warning: --check-data: the manifest on stdin is not checked; give it as a file", file=sys.stderr)
    commands = [c for name in files if name != "-" for doc in read_documents(name) for c in manifest_commands(doc)]
    problems, checked = check_commands(commands)
    if problems:
        raise UsageError(*problems)
    if checked:
        print(f"data: {', '.join(checked)}: ArrayRecord with records", file=sys.stderr)
    else:
        print("warning: --check-data: no MaxText command reads grain_train_files with dataset_type=grain; "
              "nothing to check", file=sys.stderr)

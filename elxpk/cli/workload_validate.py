"""`elxpk workload validate FILE...`: check JobSet manifests offline, as the cluster would at create time.

For CI users who render with other tools (xpk, kustomize, helm): the vendored CRD schema (strict), the
JobSet webhook's and the API server's admission rules, and the core pod schema and batch/v1 Job rules for
every replicatedJob's template. No cluster, no credentials. See elxpk/admission/files.py.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from elxpk.errors import CheckFailed

Files = Annotated[list[str], typer.Argument(
    help="YAML manifests (several documents each allowed); - reads stdin.", show_default=False,
    metavar="FILE...")]


def validate(files: Files) -> None:
    """Check manifests offline against the JobSet CRD, JobSet's admission rules and the core Job and pod
    schemas: one line per violation (FILE: PATH: message), exit 1 if any, 0 when all pass."""
    from elxpk.admission.files import validate_files

    report = validate_files(list(files))
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    for line in report.lines:
        print(line)
    if report.lines:
        raise CheckFailed(f"{len(report.lines)} violation(s) in {report.documents} document(s); the cluster "
                          f"would refuse them")
    print(f"OK: {report.documents} document(s) in {len(files)} file(s) pass the JobSet schema, admission and "
          f"Job rules")


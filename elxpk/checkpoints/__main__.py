"""`python -m elxpk.checkpoints DIR [--checkpoint-period N]`: the pre-start step of a MaxText workload.

`elxpk workload create --trainer maxtext --checkpoint-pre-start IMAGE` runs this in an init container of the
first worker pod, before MaxText starts: `elxpk checkpoint inspect DIR --quarantine` for an image without the
launcher's CLI (the trainer image: trainer/Dockerfile copies elxpk/checkpoints and the few modules it
imports; standard library, etils and elxpk_storage, the checkpoint layer it shares with the trainer). MaxText restores orbax's newest listed
step whatever it holds; moving a torn one aside first makes a restart restore the newest whole step.

What differs from `checkpoint inspect`: it always quarantines; DIR with no checkpoint yet (a first run,
MaxText's run directory holding only its logs) is nothing to check; findings about the save cadence are
printed but do not stop the start. Exit 0: a restart restores a whole step, or starts fresh; 1: the step a
restart would restore is still not whole (an unreadable step, which is left for a person to look at), or
the storage failed (unavailable, denying access: elxpk_contract.transient), which moves nothing;
2: bad input (DIR is a file, --checkpoint-period not a number).
"""

from __future__ import annotations

import argparse
import sys
import time

from elxpk.checkpoints import inspection
from elxpk.checkpoints.flags import checkpoint_period
from elxpk.checkpoints.report import render_text
from elxpk.errors import ElxpkError


def first_run(directory: str) -> bool:
    """True when DIR holds no checkpoint step yet (absent, or without <step>/ entries and checkpoints/)."""
    from elxpk_storage import checkpoint_files as ckpt_storage

    inspection.epath_module()
    root = ckpt_storage.checkpoint_root(directory, "DIR")
    try:
        if not root.exists():
            return True
        if not root.is_dir():
            return False  # resolve() says what is wrong (exit 2)
        names = [p.name for p in ckpt_storage.children(root)]
    except OSError as exc:
        raise ElxpkError(f"DIR {directory}: cannot list it: {exc}") from None
    return not any(inspection.step_of(n) for n in names) and inspection.SUBDIR not in names


def pre_start(directory: str, period_text: str | None, now: float) -> int:
    period = checkpoint_period(period_text)
    if first_run(directory):
        print(f"elxpk pre-start: {directory} holds no checkpoint yet: nothing to check", flush=True)
        return 0
    root = inspection.resolve(directory)
    inspection.refuse_cwd(root)
    with inspection.transient_is_retryable(directory):
        result = inspection.inspect_and_quarantine(root, period, now_ms=int(now * 1000))
    for line in render_text(result, now=now):
        print(f"elxpk pre-start: {line}", flush=True)
    restored = next((s for s in result.steps if s.step == result.restore_step and s.name == str(s.step)), None)
    if restored is not None and restored.state != inspection.COMMITTED:
        print(f"elxpk pre-start: a restart would restore step {restored.step}, which is {restored.state}: move it "
              "aside after a look (`elxpk checkpoint inspect DIR`)", file=sys.stderr, flush=True)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elxpk.checkpoints", description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", metavar="DIR", help="MaxText's base_output_directory/run_name (or its "
                        "checkpoints/), local or gs://")
    parser.add_argument("--checkpoint-period", metavar="STEPS", default=None)
    args = parser.parse_args(argv)
    try:
        return pre_start(args.directory, args.checkpoint_period, time.time())
    except ElxpkError as exc:  # UsageError: 2, storage: 1
        print(f"error: {exc}", file=sys.stderr)
        return int(exc.exit_code)


if __name__ == "__main__":
    sys.exit(main())

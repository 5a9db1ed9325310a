"""`python -m trainer`: run the trainer with flags and ELXPK_* environment variables.

Exit codes: 0 done; 2 bad settings (nothing written); 124 slices did not come back in time; 75 a slice
was lost and this process cannot continue (multi-controller: the supervisor restarts the group);
1 any other failure, including an exhausted retry budget.

`--print-config` prints the resolved settings as JSON and exits 0 (2 on bad settings, as a run would)
before anything imports jax: it shows what the launcher's ELXPK_* env amounts to on a machine without jax.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from elxpk_contract.errors import CheckFailed, ElxpkError

if TYPE_CHECKING:
    from elxpk_contract.settings import TrainerConfig

SLICE_LOST_EXIT_CODE = 75  # EX_TEMPFAIL: try again (restart the group)


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    try:
        return _run(sys.argv[1:] if argv is None else argv, os.environ if environ is None else environ)
    except ElxpkError as exc:
        for line in str(exc).splitlines():
            print(f"error: {line}", file=sys.stderr)
        if exc.__cause__ is not None:
            print(f"cause: {type(exc.__cause__).__name__}: {str(exc.__cause__).splitlines()[0]}", file=sys.stderr)
        return exc.exit_code


def _run(argv: Sequence[str], environ: Mapping[str, str]) -> int:
    from trainer.config import TrainerConfig

    cfg, actions = TrainerConfig.from_command_line(argv, environ)
    if "print_config" in actions:
        return _print_config(cfg)
    from trainer.cpu import ensure_devices

    if cfg.slice_backend == "simulated":
        ensure_devices(cfg.num_slices * cfg.devices_per_slice)
    elif cfg.slice_backend == "multi-controller":
        ensure_devices(cfg.devices_per_slice)
    from trainer.elastic import classify, train

    try:
        result = train(cfg)
    except Exception as exc:
        if classify(exc) is None:
            raise
        print(f"error: slice lost: {str(exc).splitlines()[0]}", file=sys.stderr)
        return SLICE_LOST_EXIT_CODE
    last = result.losses.get(result.final_step - 1)
    print(f"done: {result.final_step} steps, {result.attempts} attempt(s), final loss "
          f"{float.fromhex(last) if last else float('nan'):.6f}, run dir {result.run_dir}")
    return 0


def _print_config(cfg: TrainerConfig) -> int:
    out = sys.stdout  # None when the process started with stdout closed
    try:
        if out is None:
            raise OSError("standard output is closed")
        out.write(cfg.to_json() + "\n")
        out.flush()
    except (OSError, ValueError) as exc:  # closed (ValueError), full or broken (OSError) stdout
        raise CheckFailed(f"--print-config: cannot write the configuration to standard output: {exc}") from None
    return 0


if __name__ == "__main__":
    sys.exit(main())

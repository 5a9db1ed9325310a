"""`python -m trainer`: run the trainer with flags and ELXPK_* environment variables.

Exit codes (elxpk_contract/exit_codes.py, mapped by trainer/elastic/outcome.py): 0 done; 2 bad settings (nothing
written); 70 an error raised through the training code (traceback on stderr, then one line); 74 a write ran
out of space (one line naming the directory and the errno); 75 a slice was lost, a peer died, or a transient
infrastructure failure (out of memory, storage unavailable or denying access: retried in a restore first);
76 stalled (no step within the stall timeout); 77 preempted (SIGTERM: saved, then stopped); 124 slices did
not come back in time; 1 anything unclassified (traceback, then one line).

`--compile-only` compiles the step for a TPU slice and prints its memory as JSON (trainer/compile_only.py).
`--print-config` prints the resolved settings as JSON and exits 0 (2 on bad settings, as a run would)
before anything imports jax: it shows what the launcher's ELXPK_* env amounts to on a machine without jax.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from elxpk_contract.command_line import parse_command_line
from elxpk_contract.compile_cache import OFF, cache_dir
from elxpk_contract.errors import CheckFailed, ElxpkError
from elxpk_contract.exit_codes import SLICE_LOST, STORAGE_FULL
from elxpk_contract.exit_grace import end_now, exit_within_grace
from elxpk_contract.storage_full import storage_full_error
from elxpk_contract.transient import describe
from trainer import compile_cache, compile_only
from trainer.elastic.preemption import StopRequest, stop_on_sigterm

if TYPE_CHECKING:
    from elxpk_contract.settings import TrainerConfig
    from trainer.elastic.preemption import StopRequest


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None, *,
         restore_sigterm: bool = True) -> int:
    """Run the trainer and return its exit code. `restore_sigterm=False` (the program) leaves the trainer's
    SIGTERM handler in place for the caller to replace, so no moment is left with the default handler."""
    stop = StopRequest()
    restore_handler = stop_on_sigterm(stop)
    try:
        return _run(sys.argv[1:] if argv is None else argv, os.environ if environ is None else environ, stop)
    except ElxpkError as exc:
        for line in str(exc).splitlines():
            print(f"error: {line}", file=sys.stderr)
        if exc.__cause__ is not None:
            print(f"cause: {type(exc.__cause__).__name__}: {_first_line(exc.__cause__)}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - every outcome maps to a documented code
        from trainer.elastic.outcome import (  # lazy: keeps trainer.elastic.outcome off `--print-config`
            exit_code_for,
            is_peer_gone,
        )

        code = exit_code_for(exc)
        if code is SLICE_LOST and not is_peer_gone(exc):  # a transient infrastructure failure
            traceback.print_exc(file=sys.stderr)
            print(f"error: retryable (exit {code.code}): {describe(exc)}", file=sys.stderr)
        elif code is SLICE_LOST:
            print(f"error: slice lost: {_first_line(exc)}", file=sys.stderr)
        elif code is STORAGE_FULL:  # raised outside the writers that name their directory
            where = f"writing {getattr(exc, 'filename', None) or 'a file of the run'}"
            print(f"error: {storage_full_error(exc, where)}", file=sys.stderr)
        else:  # the training code's own error: the traceback for the log, then the one line
            traceback.print_exc(file=sys.stderr)
            print(f"error: {code.name.replace('_', ' ')} (exit {code.code}): {type(exc).__name__}: "
                  f"{_first_line(exc)}", file=sys.stderr)
        return code.code
    finally:
        if restore_sigterm:
            restore_handler()


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [""])[0][:500]


def _run(argv: Sequence[str], environ: Mapping[str, str], stop: StopRequest | None = None) -> int:
    cfg, actions = parse_command_line(argv, environ)
    if "print_config" in actions:
        return _print_config(cfg, environ)
    if "compile_only" in actions:
        return compile_only.run(cfg)
    from trainer.cpu import (  # lazy: keeps trainer.cpu off `python -m trainer --print-config`
        cpu_only_unless_accelerator,
        ensure_devices,
    )

    cpu_only_unless_accelerator()  # a CPU run prints no libtpu errors (docs/trainer.md)

    if cfg.slice_backend == "simulated":
        ensure_devices(cfg.num_slices * cfg.devices_per_slice)
    elif cfg.slice_backend == "multi-controller":
        # In xpk's GPU node group (NNODES / NODE_RANK, trainer.elastic.gke_gpu_env) a device count in XLA_FLAGS
        # is the machine's: a tools/testcluster GPU node gives its 8 GPUs as CPU devices, and no trainer
        # setting names them. Elsewhere on CPU --devices-per-slice decides, as local run does (a TPU VM's
        # chips, which such a node also gives, then count as the trainer's 2: the stories compare with
        # local run bit for bit).
        gpu_group = environ.get("NNODES") is not None or environ.get("NODE_RANK") is not None
        ensure_devices(cfg.devices_per_slice, keep_given=cfg.coordinator is None and gpu_group)
    from elxpk_storage.checkpoint_files import refuse_file_in_path  # lazy: keeps etils off --print-config

    # The cache lies beside the checkpoints: a directory under a file is the setting's one-line refusal, not a
    # cache warning first.
    refuse_file_in_path("--checkpoint-dir", cfg.checkpoint_path)
    compile_cache.configure(cfg, environ)  # before the first compile: jax reads its cache settings once
    if cfg.slice_backend == "simulated":  # its devices are this process's alone (trainer/early_open.py)
        from trainer.early_open import open_devices_in_background  # lazy: simulated backend only

        open_devices_in_background()  # while the imports below run
    from trainer.elastic.loop import train
    result = train(cfg, stop=stop, speed_out=sys.stdout)  # the speed line every --log-period steps
    last = result.losses.get(result.final_step - 1)
    print(f"done: {result.final_step} steps, {result.attempts} attempt(s), final loss "
          f"{float.fromhex(last) if last else float('nan'):.6f}, run dir {result.run_dir}")
    return 0


def _distributed_left_open() -> bool:
    """Whether the run left jax.distributed open, a peer having died (trainer.elastic.slices says why)."""
    slices = sys.modules.get("trainer.elastic.slices")  # a run that never trained imported none
    return slices is not None and slices.LEFT_OPEN.is_set()


def _print_config(cfg: TrainerConfig, environ: Mapping[str, str]) -> int:
    """The resolved settings as JSON; the compilation cache as the run will use it: the directory (beside the
    checkpoints unless given, a caller's JAX_COMPILATION_CACHE_DIR where it is not), or "off"."""
    settings = cfg.to_dict()
    given = cfg.compilation_cache_dir
    caller = environ.get(compile_cache.CALLER_CACHE) if given is None else None
    settings["compilation_cache_dir"] = caller or cache_dir(given, cfg.checkpoint_path) or OFF
    out = sys.stdout  # None when the process started with stdout closed
    try:
        if out is None:
            raise OSError("standard output is closed")
        out.write(json.dumps(settings, sort_keys=True, indent=2) + "\n")
        out.flush()
    except (OSError, ValueError) as exc:  # closed (ValueError), full or broken (OSError) stdout
        raise CheckFailed(f"--print-config: cannot write the configuration to standard output: {exc}") from None
    return 0


if __name__ == "__main__":
    outcome = main(restore_sigterm=False)
    # The outcome is decided: a SIGTERM from here on (a runtime or a wrapper that repeats it, a second
    # deletion) must not turn 77 into 143 while the process ends. Ignored, not handled: the interpreter resets
    # its own handlers to the default as it finalizes. The kubelet's SIGKILL still bounds a hung exit.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if _distributed_left_open():  # a peer died: jax's exit hook would wait for it, then abort (134)
        end_now(outcome)
    exit_within_grace(outcome)

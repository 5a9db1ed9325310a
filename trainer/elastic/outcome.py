"""Every way `python -m trainer` ends, mapped to one code of elxpk_contract.exit_codes, by class.

`ElxpkError`s carry their code: UsageError 2 (BAD_SETTINGS), Timeout 124, TrainerStopped its own (the elastic
loop giving up: 75 or 70; a preemption: 77; a restore whose retries ran out: 75), any other 1 (UNCLASSIFIED).
Every other exception takes the code of its class, the first row of elxpk_contract.failure_classes'
TRAINER_CLASSES that recognises it, in this order:
- a write that ran out of space (elxpk_contract.storage_full: ENOSPC, EDQUOT, EFBIG, wherever it was raised),
  or of file descriptors, is STORAGE_FULL (74): the storage's fault, retried by the restart, never the user's;
- a jax runtime error whose status says a slice or a peer went away is SLICE_LOST (75): DATA_LOSS,
  DEADLINE_EXCEEDED, NOT_FOUND and INTERNAL as the elastic loop classifies them, plus UNAVAILABLE, ABORTED
  and CANCELLED, which survivors of a dead peer report ("Socket closed", a cancelled collective), and UNKNOWN
  where it is gloo's TCP transport losing a peer (the CPU collectives' words). Counting those as user errors
  would end a run on an infrastructure cascade;
- a transient infrastructure failure (elxpk_contract.transient: out of memory, host or device; storage
  unavailable, slow or denying access; no thread to start) is SLICE_LOST (75): the restart is the retry;
- an exception raised through the training code (the model, the step, the optimizer, the data pipeline:
  failure_classes.USER_CODE_MODULES) is USER_ERROR (70), after the traceback: deterministic, so retrying
  reproduces it;
- anything else is UNCLASSIFIED (1): not known to be the user's, so it is counted by the restart budget,
  never failed at once. No unknown exception becomes 70.
"""

from __future__ import annotations

from elxpk_contract.errors import ElxpkError
from elxpk_contract.exit_codes import BY_CODE, UNCLASSIFIED, ExitCode
from elxpk_contract.failure_classes import PEERS_GONE, failure_class, recognised


def exit_code_for(error: BaseException) -> ExitCode:
    if isinstance(error, ElxpkError):
        return BY_CODE.get(error.exit_code, UNCLASSIFIED)
    return failure_class(error).code


def is_peer_gone(error: BaseException) -> bool:
    """Whether a jax runtime error says a slice or a peer went away (elxpk_contract.failure_classes.PEERS_GONE)."""
    return recognised(error, PEERS_GONE) is not None

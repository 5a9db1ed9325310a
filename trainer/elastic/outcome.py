"""Every way `python -m trainer` ends, mapped to one code of elxpk_contract.exit_codes, by class.

- `ElxpkError`s carry their code: UsageError 2 (BAD_SETTINGS), Timeout 124, TrainerStopped its own
  (the elastic loop giving up: 75 or 70; a preemption: 77; a restore whose retries ran out: 75), any other
  1 (UNCLASSIFIED).
- A jax runtime error whose status says a slice or a peer went away is SLICE_LOST (75): DATA_LOSS,
  DEADLINE_EXCEEDED, NOT_FOUND and INTERNAL as the elastic loop classifies them, plus UNAVAILABLE,
  ABORTED and CANCELLED, which survivors of a dead peer report ("Socket closed", a cancelled
  collective), and UNKNOWN where it is gloo's TCP transport losing a peer (the CPU collectives' words).
  Counting those as user errors would end a run on an infrastructure cascade.
- A write that ran out of space (elxpk_contract.storage_full: ENOSPC, EDQUOT, EFBIG, wherever it was
  raised) is STORAGE_FULL (74): the storage's fault, retried by the restart, never the user's.
- A transient infrastructure failure (elxpk_contract.transient: out of memory, host or device;
  storage unavailable, slow or denying access; no thread to start) is SLICE_LOST (75): the restart is the retry.
- An exception raised through the training code (the model, the step, the optimizer, the data pipeline:
  USER_CODE below) is USER_ERROR (70), after the traceback: deterministic, so retrying reproduces it.
- Anything else is UNCLASSIFIED (1): not known to be the user's, so it is counted by the restart budget,
  never failed at once. No unknown exception becomes 70.
"""

from __future__ import annotations

import os
import re
import sys

from elxpk_contract.errors import ElxpkError
from elxpk_contract.exit_codes import BY_CODE, SLICE_LOST, STORAGE_FULL, UNCLASSIFIED, USER_ERROR, ExitCode
from elxpk_contract.fd_limit import fd_errno
from elxpk_contract.storage_full import no_space_errno
from elxpk_contract.transient import transient_cause

PEER_GONE = ("DATA_LOSS", "DEADLINE_EXCEEDED", "NOT_FOUND", "INTERNAL", "UNAVAILABLE", "ABORTED", "CANCELLED")
_STATUS = re.compile(r"^\s*([A-Z_]+):")
# jax's CPU collectives (gloo) report a peer whose process ended as UNKNOWN with the TCP transport's own
# words, e.g. "UNKNOWN: Gloo AllGather failed: [.../gloo/transport/tcp/pair.cc:547] Connection closed by
# peer [127.0.0.1]:58765": the survivor of a killed or evicted slice then reached the Job controller as a
# user error (70), which fails the JobSet at once instead of restarting the group. A read or a write the
# peer's end broke says so after the peer's address: "... pair.cc:538] Read error [127.0.0.1]:26784:
# Connection reset by peer" (the survivor of part 3's fault, #31).
_GLOO_PEER_GONE = re.compile(r"^\s*UNKNOWN: Gloo \w+ failed: \[[^\]]*gloo/transport/tcp/[^\]]*\] "
                             r"(?:(?:Read|Write) error \[[^\]]*\]:\d+: )?"
                             r"(Connection closed by peer|Connection reset by peer|Broken pipe|Connection refused|"
                             r"Timed out)")


def exit_code_for(error: BaseException) -> ExitCode:
    if isinstance(error, ElxpkError):
        return BY_CODE.get(error.exit_code, UNCLASSIFIED)
    if no_space_errno(error) is not None or fd_errno(error) is not None:  # out of space or of file descriptors
        return STORAGE_FULL
    if is_peer_gone(error) or transient_cause(error) is not None:
        return SLICE_LOST
    if _through_user_code(error):
        return USER_ERROR
    return UNCLASSIFIED


# The training code: what a user of this trainer changes to train their model (its model, step, optimizer and
# data modules). An error raised through it reproduces on every retry.
_TRAINER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER_CODE = tuple(os.path.join(_TRAINER, *part) for part in (("core", "model.py"), ("core", "step.py"),
                                                             ("core", "optim.py"), ("data", "")))


def _through_user_code(error: BaseException) -> bool:
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(USER_CODE):
            return True
        tb = tb.tb_next
    return False


def is_peer_gone(error: BaseException) -> bool:
    if "jax" not in sys.modules:  # nothing imported jax, so this cannot be one of its errors
        return False
    import jax

    if not isinstance(error, jax.errors.JaxRuntimeError):
        return False
    match = _STATUS.match(str(error))
    return match is not None and (match.group(1) in PEER_GONE or _GLOO_PEER_GONE.match(str(error)) is not None)

"""Every way `python -m trainer` ends, mapped to one code of elxpk_contract.exit_codes.

- `ElxpkError`s carry their code: UsageError 2 (BAD_SETTINGS), Timeout 124, TrainerStopped its own
  (the elastic loop giving up: 75 or 70; a preemption: 77), any other 1 (UNCLASSIFIED).
- A jax runtime error whose status says a slice or a peer went away is SLICE_LOST (75): DATA_LOSS,
  DEADLINE_EXCEEDED, NOT_FOUND and INTERNAL as the elastic loop classifies them, plus UNAVAILABLE,
  ABORTED and CANCELLED, which survivors of a dead peer report ("Socket closed", a cancelled
  collective), and UNKNOWN where it is gloo's TCP transport losing a peer (the CPU collectives' words).
  Counting those as user errors would end a run on an infrastructure cascade.
- A write that ran out of space (elxpk_contract.storage_full: ENOSPC, EDQUOT, EFBIG, wherever it was
  raised) is STORAGE_FULL (74): the storage's fault, retried by the restart, never the user's.
- Any other exception is the training code's (model, data, a deterministic runtime error such as
  RESOURCE_EXHAUSTED): USER_ERROR (70), one line on stderr after the traceback.
"""

from __future__ import annotations

import re
import sys

from elxpk_contract.errors import ElxpkError
from elxpk_contract.exit_codes import BY_CODE, SLICE_LOST, STORAGE_FULL, UNCLASSIFIED, USER_ERROR, ExitCode
from elxpk_contract.storage_full import no_space_errno

PEER_GONE = ("DATA_LOSS", "DEADLINE_EXCEEDED", "NOT_FOUND", "INTERNAL", "UNAVAILABLE", "ABORTED", "CANCELLED")
_STATUS = re.compile(r"^\s*([A-Z_]+):")
# jax's CPU collectives (gloo) report a peer whose process ended as UNKNOWN with the TCP transport's own
# words, e.g. "UNKNOWN: Gloo AllGather failed: [.../gloo/transport/tcp/pair.cc:547] Connection closed by
# peer [127.0.0.1]:58765": the survivor of a killed or evicted slice then reached the Job controller as a
# user error (70), which fails the JobSet at once instead of restarting the group.
_GLOO_PEER_GONE = re.compile(r"^\s*UNKNOWN: Gloo \w+ failed: \[[^\]]*gloo/transport/tcp/[^\]]*\] "
                             r"(Connection closed by peer|Connection reset by peer|Broken pipe|Connection refused|"
                             r"Timed out)")


def exit_code_for(error: BaseException) -> ExitCode:
    if isinstance(error, ElxpkError):
        return BY_CODE.get(error.exit_code, UNCLASSIFIED)
    if no_space_errno(error) is not None:
        return STORAGE_FULL
    if _is_peer_gone(error):
        return SLICE_LOST
    return USER_ERROR


def _is_peer_gone(error: BaseException) -> bool:
    if "jax" not in sys.modules:  # nothing imported jax, so this cannot be one of its errors
        return False
    import jax

    if not isinstance(error, jax.errors.JaxRuntimeError):
        return False
    match = _STATUS.match(str(error))
    return match is not None and (match.group(1) in PEER_GONE or _GLOO_PEER_GONE.match(str(error)) is not None)

"""Every class of failure the trainer and the launcher tell apart, one row each: its name, how it is recognised,
the exit code it ends `python -m trainer` with (elxpk_contract.exit_codes), whether another try in the same
process may mend it, and the words messages use for it.

The classifiers read these rows and hold no status list or pattern of their own:
- trainer/elastic/outcome.py: the exit code of what ended the run, the first row of `TRAINER_CLASSES` that
  recognises it (an ElxpkError carries its own code and is not looked up);
- trainer/elastic/policy.py: whether a failure is an elastic event (`ELASTIC_CLASSES`, recorded by name);
- elxpk/retry_policy.py: whether an HTTP answer is worth another try (`API_UNAVAILABLE`'s statuses), for the
  Kubernetes API, Cloud Storage, the GKE lookup and the notifications.

`retryable` is the same process's retry: the elastic loop's (a slice loss), a restore's (a transient storage
failure, trainer/ckpt/transient_retry.py), a request's. A class that is not retryable here may still be the
restart's to retry: its exit code's `retryable` says that. Standard library only: the trainer, the launcher and
the init container's image all import it; no jax is imported here (an error of jax's exists only once jax is).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import NamedTuple

from elxpk_contract.exit_codes import SLICE_LOST, STORAGE_FULL, UNCLASSIFIED, USER_ERROR, ExitCode
from elxpk_contract.fd_limit import fd_errno
from elxpk_contract.storage_full import no_space_errno
from elxpk_contract.transient import (
    ACCESS_DENIED,
    HOST,
    OUT_OF_MEMORY,
    UNAVAILABLE,
    http_status,
    transient_cause,
)


class FailureClass(NamedTuple):
    name: str  # as a record names it (the elastic loop's `kind`)
    recognises: Callable[[BaseException], bool]
    code: ExitCode  # what `python -m trainer` exits with when this ends the run
    retryable: bool  # another try in this process may mend it
    words: str  # how a message names it
    statuses: frozenset[int] = frozenset()  # the HTTP answers of this class, where answers have one


# A status word at the start of a jax runtime error's message ("DATA_LOSS: ...").
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


def jax_status(error: BaseException) -> str | None:
    """The status word a `jax.errors.JaxRuntimeError` starts with ('DATA_LOSS'), or None for anything else.
    Nothing that did not import jax can hold one of its errors, so jax is never imported here."""
    jax = sys.modules.get("jax")
    if jax is None or not isinstance(error, jax.errors.JaxRuntimeError):
        return None
    match = _STATUS.match(str(error))
    return match.group(1) if match else None


def _status_in(*statuses: str) -> Callable[[BaseException], bool]:
    return lambda error: jax_status(error) in statuses


def _peer_gone(error: BaseException) -> bool:
    """What survivors of a dead peer report: UNAVAILABLE ("Socket closed"), ABORTED, CANCELLED (a cancelled
    collective), and UNKNOWN where it is gloo's TCP transport losing a peer."""
    status = jax_status(error)
    return status is not None and (status in ("UNAVAILABLE", "ABORTED", "CANCELLED")
                                   or _GLOO_PEER_GONE.match(str(error)) is not None)


def _out_of_space(error: BaseException) -> bool:
    return no_space_errno(error) is not None or fd_errno(error) is not None


def _transient(words: str) -> Callable[[BaseException], bool]:
    return lambda error: transient_cause(error) == words


# The training code: what a user of this trainer changes to train their model (its model, step, optimizer and
# data modules). An error raised through it reproduces on every retry.
USER_CODE_MODULES = frozenset({"trainer.core.model", "trainer.core.step", "trainer.core.optim", "trainer.data"})
USER_CODE_PACKAGE = "trainer.data."  # every module of the data pipeline


def raised_through_user_code(error: BaseException) -> bool:
    tb = error.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__")
        if isinstance(module, str) and (module in USER_CODE_MODULES or module.startswith(USER_CODE_PACKAGE)):
            return True
        tb = tb.tb_next
    return False


# A write that ran out of space (ENOSPC, EDQUOT, EFBIG) or of file descriptors, wherever it was raised: the
# storage's or the host's fault, never the user's.
OUT_OF_SPACE = FailureClass("storage_full", _out_of_space, STORAGE_FULL, False, "out of space")
# A slice or a peer went away (the elastic loop's events): DATA_LOSS surely; DEADLINE_EXCEEDED, NOT_FOUND and
# INTERNAL maybe (retried only after a new checkpoint); what survivors report is the restart's to retry.
SLICE_DOWN = FailureClass("slice_down", _status_in("DATA_LOSS"), SLICE_LOST, True, "slice lost")
MAYBE_SLICE_DOWN = FailureClass("maybe_slice_down", _status_in("DEADLINE_EXCEEDED", "NOT_FOUND", "INTERNAL"),
                                SLICE_LOST, True, "slice lost")
PEER_GONE = FailureClass("peer_gone", _peer_gone, SLICE_LOST, False, "slice lost")
# Transient infrastructure failures (elxpk_contract.transient recognises them): a restore retries them, then
# the restart does. Counting them as user errors would end a run on an infrastructure cascade.
MEMORY = FailureClass("out_of_memory", _transient(OUT_OF_MEMORY), SLICE_LOST, True, OUT_OF_MEMORY)
STORAGE_UNAVAILABLE = FailureClass("storage_unavailable", _transient(UNAVAILABLE), SLICE_LOST, True, UNAVAILABLE)
STORAGE_DENIED = FailureClass("storage_access_denied", _transient(ACCESS_DENIED), SLICE_LOST, True, ACCESS_DENIED)
HOST_RESOURCES = FailureClass("host_resources", _transient(HOST), SLICE_LOST, True, HOST)
USER_CODE = FailureClass("user_code", raised_through_user_code, USER_ERROR, False, "user error")
NOT_CLASSIFIED = FailureClass("unclassified", lambda error: True, UNCLASSIFIED, False, "unclassified")

# In order: the first row that recognises a failure is its class.
TRAINER_CLASSES = (OUT_OF_SPACE, SLICE_DOWN, MAYBE_SLICE_DOWN, PEER_GONE, MEMORY, STORAGE_UNAVAILABLE,
                   STORAGE_DENIED, HOST_RESOURCES, USER_CODE, NOT_CLASSIFIED)
ELASTIC_CLASSES = (SLICE_DOWN, MAYBE_SLICE_DOWN)  # the events the elastic loop retries in process
PEERS_GONE = (SLICE_DOWN, MAYBE_SLICE_DOWN, PEER_GONE)  # "slice lost" in the trainer's last line

# An HTTP answer another try may mend: a timeout (408), too many requests (429), or a server's fault (500-599;
# 999 is no server's transient fault), as a status or as an HTTP error that carries one (urllib's `.code`). The
# launcher's error after its tries exits 1.
_ANSWERS_TO_RETRY = frozenset({408, 429, *range(500, 600)})
API_UNAVAILABLE = FailureClass("api_unavailable", lambda error: http_status(error) in _ANSWERS_TO_RETRY,
                               UNCLASSIFIED, True, "not answering", _ANSWERS_TO_RETRY)


def failure_class(error: BaseException, classes: tuple[FailureClass, ...] = TRAINER_CLASSES) -> FailureClass:
    """The first of `classes` that recognises `error` (TRAINER_CLASSES ends with one that recognises all)."""
    return next(row for row in classes if row.recognises(error))


def recognised(error: BaseException, classes: tuple[FailureClass, ...]) -> FailureClass | None:
    return next((row for row in classes if row.recognises(error)), None)

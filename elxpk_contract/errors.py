"""The small, flat set of exceptions elxpk raises on purpose.

Each maps to one exit code (see contracts: 0 ok, 1 the checked thing failed, 2 bad input, 124 timeout).
The CLI prints ``str(exc)`` as one line, never a stack trace, for every subclass of ``ElxpkError``.
"""

from __future__ import annotations


class ElxpkError(Exception):
    """Base class: an expected failure with a message fit for a terminal or an issue."""

    exit_code = 1


class UsageError(ElxpkError):
    """Bad input: a flag value, a missing file, a conflicting combination. Nothing was written."""

    exit_code = 2

    def __init__(self, *messages: str) -> None:
        # Several validation errors are reported at once; each stays one line.
        self.messages = [m for m in messages if m]
        super().__init__("\n".join(self.messages))


class ClusterError(ElxpkError):
    """The cluster or the cloud API answered with an error (auth, missing CRD, server error)."""


class NoCredentials(UsageError, ClusterError):
    """No Google credentials where a command needs them (GKE, gs://): the user's setup to fix, exit 2 like
    every missing input, with one fix (elxpk_storage.gcs_auth.how_to_authenticate)."""


class NotFoundError(ClusterError):
    """The named object does not exist."""


class ConflictError(ClusterError):
    """The object already exists (HTTP 409)."""


class CheckFailed(ElxpkError):
    """The thing checked failed: the workload failed, two runs diverged, a duplicate example was found."""


class Timeout(ElxpkError):
    """A bounded wait ran out."""

    exit_code = 124


class StorageFull(ElxpkError):
    """A write ran out of space: no space left, a disk quota, a file-size limit (elxpk_contract.storage_full).
    The storage's fault, not the input's: the same write succeeds once space is freed, and nothing already
    written (the previous checkpoint) was harmed. The trainer's `storage_full` code (exit_codes.py), and
    `elxpk`'s exit 74 for the same cause."""

    exit_code = 74

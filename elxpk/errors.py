"""The launcher's name for the contract's exception set (declared once, in elxpk_contract/errors.py)."""

from elxpk_contract.errors import (  # noqa: F401
    CheckFailed,
    ClusterError,
    ConflictError,
    ElxpkError,
    NoCredentials,
    NotFoundError,
    StorageFull,
    Timeout,
    UsageError,
)

"""The fault schedule lives in the contract (the local run validates it too); the trainer's name for it."""

from elxpk_contract.faults import POINTS, Fault, FaultSchedule  # noqa: F401

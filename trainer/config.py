"""The trainer's settings are the contract's table (elxpk_contract/settings.py); this is the trainer's name for it."""

from elxpk_contract.settings import TrainerConfig, env_name, flag_name  # noqa: F401

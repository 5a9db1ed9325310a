"""Checkpoint directories as storage holds them: `elxpk checkpoint inspect` (elxpk/checkpoints/inspection.py)."""

"""The checkpoint-period planner (`elxpk plan`): closed-form goodput model, Monte Carlo check, calibration.

Kept import-free: `elxpk workload create` imports `elxpk.plan.hint` on every run.
"""

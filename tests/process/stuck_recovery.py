"""`python -m tests.process.stuck_recovery TRAINER_FLAGS...`: the trainer as `python -m trainer` runs it,
on simulated slices whose injected hang cannot be interrupted, as a thread stuck in a collective inside
XLA cannot: the stall watchdog's in-process recovery never takes hold, and the process must still end."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import os

    from elxpk_contract.command_line import parse_command_line
    from elxpk_contract.faults import FaultSchedule
    from trainer.clock import SystemClock
    from trainer.cpu import ensure_devices

    cfg, _ = parse_command_line(argv, os.environ)
    ensure_devices(cfg.num_slices * cfg.devices_per_slice)  # before anything imports jax
    from trainer.elastic.loop import train
    from trainer.elastic.slices import SimulatedSlices

    class UninterruptibleHang(SimulatedSlices):
        def interrupt_stall(self, why: str) -> None:
            pass  # the hung step never returns: nothing releases it

    clock = SystemClock()
    faults = FaultSchedule.parse(cfg.fault, cfg.revive_after)
    train(cfg, faults=faults, clock=clock,
          backend=UninterruptibleHang(cfg.num_slices, cfg.devices_per_slice, faults, clock))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

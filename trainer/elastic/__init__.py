"""The elastic loop: one process that goes on after a slice fails. `loop.train` runs attempts (attempt),
recovers live from the survivors' replicas (live_recovery, slices) or from the last checkpoint, and watches
for stalls and preemption (watchdog, stalls, preemption, progress); outcome maps the end to an exit code."""

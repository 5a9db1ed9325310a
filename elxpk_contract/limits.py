"""Bounds every record and setting shares. Its own module, standard library only, so that the settings
table (read on every `workload create`) need not import the run records (~15 ms of slotted dataclasses)."""

# A step or an example id beyond this is no real run's (and would overflow the int64 arrays of readers).
MAX_INDEX = 2**62

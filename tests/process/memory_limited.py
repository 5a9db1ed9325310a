"""`python -m tests.process.memory_limited MIB TRAINER_FLAGS...`: `python -m trainer` itself, under a real
limit on the process's address space (RLIMIT_AS, MIB mebibytes) set before anything is imported: every
allocation past it fails as it would under a container's memory limit (malloc, XLA's allocator)."""

from __future__ import annotations

import resource
import runpy
import sys

if __name__ == "__main__":
    limit = int(sys.argv[1]) << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    sys.argv = ["trainer", *sys.argv[2:]]
    runpy.run_module("trainer", run_name="__main__", alter_sys=True)

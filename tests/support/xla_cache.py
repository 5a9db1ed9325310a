"""The XLA compilation cache the test run shares: every jax process the tests start (the pytest process,
`python -m trainer`, `elxpk local run`'s trainers) reads and writes one folder of compiled executables.

Most of the suite's CPU went to XLA compiling the same small steps again in each of hundreds of fresh
processes; a cache hit loads the executable instead (a tiny trainer run: about 9 CPU s cold, 4 with every
compile a hit). An executable loaded from the cache is the one the compile wrote, so runs stay bitwise the
same (tests/test_xla_cache.py checks a hit and its losses).

- Only the tests' environment sets it (tests/conftest.py, before jax is imported; subprocesses inherit it);
  the trainer and the launcher never do. `setdefault`: JAX_ENABLE_COMPILATION_CACHE=false, or another
  JAX_COMPILATION_CACHE_DIR, in the caller's environment wins.
- One folder per jax and jaxlib version under ~/.cache/elxpk/xla/ (ELXPK_CACHE_DIR moves it), kept between
  runs: jax's own key already holds the computation, the compile options, the devices and the XLA flags, so
  the version in the folder name only keeps an upgrade from carrying the old entries along.
- Every compile is written (jax's default writes only those over 1 s and, on CPU, skips small entries).
- Every process of a jax.distributed group writes too (jax writes from process 0 only, and on CPU devices
  the other processes' keys differ): tests/support/xla_site/sitecustomize.py, first on PYTHONPATH.
- A size cap, because with one jax's cache takes a file lock around each read and write (filelock, a test
  dependency): the lanes of .ci/run write the same keys at once, and without the lock a reader could see an
  entry half written. Past the cap the least recently used entries go.
"""

from __future__ import annotations

import os
from importlib.metadata import version
from pathlib import Path

from tests.support.install_cache import cache_root

SITE = Path(__file__).resolve().parent / "xla_site"  # its sitecustomize: every process of a group writes
MAX_BYTES = 2 << 30  # far above what the suite writes: the process and exit-codes lanes wrote 5 MiB


def xla_cache_env() -> dict[str, str]:
    """The environment variables (jax reads each flag from its upper-case name) that turn the cache on."""
    folder = cache_root("xla") / f"jax-{version('jax')}-jaxlib-{version('jaxlib')}"
    return {
        "JAX_COMPILATION_CACHE_DIR": str(folder),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1",  # no size floor, and no override of it
        "JAX_COMPILATION_CACHE_MAX_SIZE": str(MAX_BYTES),
        "PYTHONPATH": with_site(os.environ.get("PYTHONPATH", "")),
    }


def with_site(pythonpath: str) -> str:
    """`pythonpath` with SITE first (once)."""
    parts = [p for p in pythonpath.split(os.pathsep) if p and p != str(SITE)]
    return os.pathsep.join([str(SITE), *parts])


if __name__ == "__main__":  # `.ci/run` starts the test cluster with it: `env $(python -m tests.support.xla_cache) ...`
    print(" ".join(f"{name}={value}" for name, value in xla_cache_env().items()))

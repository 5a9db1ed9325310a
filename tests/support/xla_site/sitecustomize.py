"""Tests only: every process of a jax.distributed group writes its compiles to the tests' XLA cache.

jax writes a persistent-cache entry from process 0 only (jax._src.compiler._cache_write: "contention for
writes on some filesystems"). On this machine's CPU devices process 1's key for the same step is another (the
key hashes the devices' topology as the process sees it), so process 1 of a group found nothing and compiled
every executable again on every start: 6.6 CPU s against process 0's 2.5 in a 4-step group, in each of the suite's
multi-controller starts (the stories' pods, `local run --mode multi-controller`, the group tests).

This folder is put first on PYTHONPATH by the tests' environment (tests/support/xla_cache.py), so Python
imports this module at start-up in every process the tests start. It imports nothing heavy: it only waits
for jax._src.compiler to be imported, then lets a non-zero process write what it compiled under its own key,
with jax's own writer and the same conditions. The executable a later start loads is the one that process
compiled, as for process 0 (tests/test_xla_cache.py checks the hook takes).

It also makes each write cheap again: with a size cap, which the tests' cache sets for jax's file lock, jax's
LRUCache walks the whole folder at every write (_evict_if_needed: a stat and an atime-file read per entry,
through etils.epath), 0.2 CPU s per write at 3,000 entries, in every process, and the folder grows by about
a thousand entries a day of runs. A first pass sums the entries' sizes with os.scandir (16 ms at 3,000); a
folder over its cap goes on to jax's own pass, which evicts exactly as before, so nothing changes but the
cost. tests/conftest.py imports this module too, for the pytest process itself.
"""

from __future__ import annotations

import os
import sys
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from typing import Any

_COMPILER = "jax._src.compiler"
_LRU_CACHE = "jax._src.lru_cache"


_PARAMETERS = ("cache_key", "compile_time_secs", "module_name", "backend", "executable", "host_callbacks")


def _write_from_every_process(compiler: Any) -> None:
    """Wrap compiler._cache_write: process 0 goes through jax's own; another process writes as jax would. A
    jax whose writer looks otherwise (another venv's, e.g. MaxText's) is left as it is."""
    import inspect

    original = getattr(compiler, "_cache_write", None)
    if original is None or getattr(original, "_every_process", False):
        return
    if tuple(inspect.signature(original).parameters) != _PARAMETERS:
        return
    distributed, compilation_cache, config = compiler.distributed, compiler.compilation_cache, compiler.config

    def cache_write(cache_key, compile_time_secs, module_name, backend, executable, host_callbacks):
        if distributed.global_state.process_id == 0 or host_callbacks:
            return original(cache_key, compile_time_secs, module_name, backend, executable, host_callbacks)
        if compile_time_secs < config.persistent_cache_min_compile_time_secs.value:
            return None
        try:
            compilation_cache.put_executable_and_time(cache_key, module_name, executable, backend,
                                                      int(compile_time_secs))
        except Exception:  # as jax's own writer: an entry not written is a compile next time, not an error
            return None
        return None

    cache_write._every_process = True  # type: ignore[attr-defined]
    compiler._cache_write = cache_write


def _sum_sizes_before_evicting(lru_cache: Any) -> None:
    """Wrap LRUCache._evict_if_needed: a local folder within its cap returns after one os.scandir pass (jax's
    pass would evict nothing: it evicts only while the entries' sizes sum past the cap); any other case, and
    an entry that vanishes mid-pass, goes through jax's own. A jax whose cache looks otherwise is left as it is."""
    import inspect

    cache_class = getattr(lru_cache, "LRUCache", None)
    original = getattr(cache_class, "_evict_if_needed", None)
    suffix = getattr(lru_cache, "_CACHE_SUFFIX", None)
    is_local = getattr(lru_cache, "_is_local_filesystem", None)
    if original is None or suffix is None or is_local is None or getattr(original, "_sums_first", False):
        return
    if tuple(inspect.signature(original).parameters) != ("self", "additional_size"):
        return

    def within_cap(cache: Any, additional_size: int) -> bool:
        folder, cap = str(getattr(cache, "path", "")), getattr(cache, "max_size", None)
        if not (getattr(cache, "eviction_enabled", False) and isinstance(cap, int) and folder and is_local(folder)):
            return False
        try:
            with os.scandir(folder) as entries:  # as jax's glob(f"*{suffix}"): no hidden names
                total = sum(e.stat().st_size for e in entries if e.name.endswith(suffix) and not e.name.startswith("."))
        except OSError:  # an entry gone mid-pass, say: jax's own pass decides
            return False
        return total <= cap - additional_size

    def evict_if_needed(self: Any, *, additional_size: int = 0) -> None:
        if within_cap(self, additional_size):
            return None
        return original(self, additional_size=additional_size)

    evict_if_needed._sums_first = True  # type: ignore[attr-defined]
    cache_class._evict_if_needed = evict_if_needed


_WRAPS = {_COMPILER: _write_from_every_process, _LRU_CACHE: _sum_sizes_before_evicting}


class _AfterCompilerImport(MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> ModuleSpec | None:
        wrap = _WRAPS.get(name)
        if wrap is None:
            return None
        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_wrap(module: Any) -> None:
            exec_module(module)
            wrap(module)

        spec.loader.exec_module = exec_then_wrap  # type: ignore[method-assign]
        return spec


# Once, also where this file is imported under two names (site start-up, then tests/conftest.py).
if not any(type(finder).__name__ == _AfterCompilerImport.__name__ for finder in sys.meta_path):
    sys.meta_path.insert(0, _AfterCompilerImport())

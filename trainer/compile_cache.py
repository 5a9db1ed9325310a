"""Turns on jax's persistent compilation cache where the run's settings put it (elxpk_contract.compile_cache
says where and why), before the first compile.

What keeps it correct (jax 0.10.2, jax/_src/compilation_cache.py, lru_cache.py, compiler.py):
- The key is a hash of the computation, the compile options, the devices, the XLA flags and the jax,
  jaxlib and backend versions, so an entry is only ever loaded where it was compiled for exactly that.
- Many hosts at once: only jax's process 0 writes (on a TPU slice every process has the same key; the
  others read), a key is written once and never rewritten, and an object store makes the object visible
  only when it is whole. On a shared local filesystem a reader may meet a half-written entry: see below.
- A corrupt, truncated or foreign entry fails to decompress or to load; jax warns ("Error reading
  persistent compilation cache entry") and compiles, and a failed write is a warning too. So the cache can
  make a start slower, never fail it. The one exception is the directory itself: jax creates it at the
  first compile and does not catch that error, so it is checked here, and a cache that cannot be used is
  one warning line and a run without it.
- gs:// works natively: jax goes through etils.epath for a non-local path (gcsfs, a trainer dependency).
  Without a size cap (jax's default, -1) there is no lock file; with one, jax uses a SoftFileLock on gs://.
- jax writes only compiles over 1 s (jax_persistent_cache_min_compile_time_secs): a train step on an
  accelerator, not the small helpers. JAX_* env variables still tune it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from elxpk_contract.compile_cache import cache_dir
from elxpk_contract.setting_rules import said

if TYPE_CHECKING:
    from elxpk_contract.settings import TrainerConfig

CALLER_CACHE = "JAX_COMPILATION_CACHE_DIR"  # jax's own variable: the caller chose a cache
XLA_CACHES = "JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES"  # jax's own variable: the caller chose XLA's caches


def configure(cfg: TrainerConfig, environ: Mapping[str, str]) -> str | None:
    """Point jax's persistent cache at the run's cache directory; return the directory in use (None: off).

    Not given, a JAX_COMPILATION_CACHE_DIR in `environ` wins over the default beside the checkpoints: the
    caller chose one cache for many runs (the tests' shared one, tests/support/xla_cache.py). Given, the
    setting wins; `off` turns every cache off."""
    import jax

    if cfg.compilation_cache_dir is None and environ.get(CALLER_CACHE):
        return environ[CALLER_CACHE]
    path = cache_dir(cfg.compilation_cache_dir, cfg.checkpoint_path)
    if path is None:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    if path.startswith("gs://"):  # before gcsfs is first imported: it reads the emulator's settings once
        from elxpk_storage import gcs_auth  # lazy: a gs:// cache only (google-auth)

        gcs_auth.require_credentials(f"{said('compilation_cache_dir')} {path:.200}")
    problem = _unusable(path)
    if problem is not None:
        print(f"warning: --compilation-cache-dir {path}: {problem}; every compile of this run starts from "
              "scratch", file=sys.stderr)
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    jax.config.update("jax_compilation_cache_dir", path)  # JAX_ENABLE_COMPILATION_CACHE=false still wins
    if not environ.get(XLA_CACHES):
        # jax's default puts `<cache>/xla_gpu_per_fusion_autotune_cache_dir` into every compile's debug options,
        # and its key keeps that path: the same step under a cache at another path (a copied or moved run dir,
        # a node-local copy) is a miss on every backend (jax 0.10.2 compiler.py get_compile_options,
        # cache_key.py). A hit already skips GPU autotuning; only a GPU miss loses that cache.
        jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
    return path


def _unusable(path: str) -> str | None:
    """Why jax could not create `path` (its cache does at the first compile, uncaught), or None. Reads and
    writes that fail later are jax's warnings; nothing is listed here (a large cache on gs:// lists slowly)."""
    try:
        from etils import epath  # as jax reaches a gs:// cache; a local path too

        epath.Path(path).mkdir(parents=True, exist_ok=True)
    except Exception as exc:  # noqa: BLE001 - a storage or permission error of any client: run uncached
        first = (str(exc).splitlines() or [""])[0][:200]
        return f"cannot be used ({type(exc).__name__}: {first})"
    return None

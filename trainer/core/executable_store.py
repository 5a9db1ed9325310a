"""Serialized train-step executables beside the compilation cache: a restart loads the step, not compiles it.

jax's persistent compilation cache still traces and lowers the step and hashes the module before it can look
an entry up (6 s of a 19-24 s restart of 125m on a v5e chip, issue 49); a serialized executable
(jax.experimental.serialize_executable) skips all of that. An entry is only ever used where it is valid:

- Its name is the digest of its key, and the key is written inside it and compared whole on load: the
  step's fingerprint (StepCache's: model, optimizer, reduction, remat, attention, donation), the digest of
  trainer/core's source (the code that builds the step), the mesh (shape, axes and devices in order), every
  argument's shape, dtype and sharding, the compiler options, the jax/jaxlib/libtpu/optax versions and the
  backend's platform version, the XLA flags (XLA_FLAGS, LIBTPU_INIT_ARGS), the jax settings that change a
  trace, and this process's index among the group's (each process loads its own part of the program) and
  whether it runs in a jax.distributed group at all (a group's collectives are compiled for its runtime).
- Its payload carries its sha256: a truncated or altered entry is refused before it is unpickled.
- A reader meets a whole entry or none, and two racing writers of one key leave one whole entry: a temporary
  name renamed over it on a local disk, one upload on an object store (trainer/core/executable_entries.py).
- Anything else that goes wrong (a foreign pickle, a version whose loader rejects it) is caught: the step is
  compiled as before. The store can make a start slower, never wrong, never failed.

Only a step XLA compiled in this process is saved, never one jax's persistent cache served: on CPU (jax
0.10.2) such an executable serializes without its code, loads, and fails at its first run ("NOT_FOUND:
Function add_select_fusion not found"), so the store would fail the run it was meant to speed up. A process
that hit jax's cache writes no entry; the first process that compiles does.

The devices an executable is loaded onto are the mesh's, in the mesh's order: jax's default (every device of
the backend) aborts the process on a mesh of a subset of them (a resize), a CHECK failure in XLA, not an
exception. The key names those devices in that order, so an entry is loaded only onto the devices it was
compiled for.

Trusted like code (unpickling an entry runs code): a local directory is private (0700, created so), owned
by this user, and never reached through a symbolic link; an entry is opened without following one. A store
that cannot be made so is one warning line and a run that compiles. On an object store (gs://, beside the
checkpoints and jax's cache) the bucket's access decides, as it does for those. Each process of a group
writes and reads its own entries (the key holds its index), where jax's cache is written by process 0
alone: on the CPU pods of the test cluster, whose processes' keys differ, process 1 compiled at every
restart (issue 49); here every process loads its own. Not yet: a node-local copy before the bucket's.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from elxpk_contract.compile_cache import cache_dir
from trainer.compile_cache import CALLER_CACHE
from trainer.core.executable_entries import canonical, is_remote, read_entry, write_entry
from trainer.trusted_cache import open_trusted_dir

FORMAT = 1
SUFFIX = ".xexec"
STORE_SUFFIX = "-executables"  # the store is the compilation cache's sibling: RUN/xla-cache-executables
_SOURCE = Path(__file__).resolve().parent  # trainer/core: the code that builds the step


def store_dir(compile_cache_setting: str | None, checkpoint_path: str,
              environ: Mapping[str, str] | None = None) -> str | None:
    """The run's store: the sibling of the compilation cache the run uses (trainer/compile_cache.py's rule: the
    setting, else a caller's JAX_COMPILATION_CACHE_DIR in `environ`, else beside the checkpoints), off where
    that cache is off (`--compilation-cache-dir off`); local or gs://."""
    caller = (environ or {}).get(CALLER_CACHE) if compile_cache_setting is None else None
    cache = caller or cache_dir(compile_cache_setting, checkpoint_path)
    if cache is None:
        return None
    return cache.rstrip("/") + STORE_SUFFIX


def _code_digest() -> str:
    """sha256 over trainer/core's Python sources: a trainer whose step code changed must not load the old
    step, whatever its settings say. Read once per process (a few hundred KiB)."""
    global _CODE
    if _CODE is None:
        digest = hashlib.sha256()
        for path in sorted(_SOURCE.rglob("*.py")):
            digest.update(str(path.relative_to(_SOURCE)).encode() + b"\0" + path.read_bytes() + b"\0")
        _CODE = digest.hexdigest()
    return _CODE


_CODE: str | None = None


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _arg_layout(args: Any) -> list:
    """Each argument leaf's shape, dtype and sharding (its mesh's devices are in the key's mesh)."""
    import jax

    leaves, tree = jax.tree.flatten(args)
    return [str(tree)] + [[list(a.shape), str(a.dtype), str(getattr(a, "sharding", None))] for a in leaves]


def entry_key(fingerprint: tuple, mesh: Any, args: Any, options: dict | None,
              process: tuple[int, int] | None = None) -> dict:
    """Everything that makes a compiled step valid to run here (the module's docstring lists why each);
    `process`: (index, count) of the process that runs it, this one's unless given (--compile-only)."""
    import jax

    devices = list(mesh.devices.flat)
    client = devices[0].client
    return {
        "format": FORMAT,
        "step": [str(part) for part in fingerprint],
        "code": _code_digest(),
        "mesh": {"shape": list(mesh.devices.shape), "axes": [str(a) for a in mesh.axis_names],
                 "devices": [d.id for d in devices], "kinds": sorted({d.device_kind for d in devices}),
                 # a topology's devices (--compile-only) say no slice_index where a one-slice chip's say 0
                 "slices": [getattr(d, "slice_index", None) or 0 for d in devices]},
        "args": _arg_layout(args),
        "compiler_options": {k: str(v) for k, v in sorted((options or {}).items())},
        "versions": {"jax": jax.__version__, "jaxlib": _version("jaxlib"), "libtpu": _version("libtpu"),
                     "optax": _version("optax"),  # the optimizer's update is traced into the step
                     "platform": client.platform, "platform_version": client.platform_version},
        "xla_flags": {name: os.environ.get(name, "") for name in ("XLA_FLAGS", "LIBTPU_INIT_ARGS")},
        "jax_config": {name: str(getattr(jax.config, name)) for name in (
            "jax_enable_x64", "jax_default_matmul_precision", "jax_threefry_partitionable",
            "jax_cpu_collectives_implementation")},
        "process": list(process or (jax.process_index(), jax.process_count())),
        # A process of a jax.distributed group, even a group of one, compiles its collectives for the group's
        # runtime: its step loaded where jax.distributed is off ran, and differed in the last bits (a one-slice
        # multi-controller run's entry, loaded by a simulated run on the same devices, broke a bitwise resize).
        "distributed": jax.distributed.is_initialized(),
    }


def entry_name(key: dict) -> str:
    return hashlib.sha256(canonical(key)).hexdigest()[:40] + SUFFIX


class ExecutableStore:
    """Loads and saves one directory's serialized steps; every failure is a miss with its reason."""

    def __init__(self, directory: str | Path, *, ahead_for: int | None = None) -> None:
        """`ahead_for`: write each step for every process of a group of this many (--compile-only, for a
        TPU slice's hosts, which all run one program) instead of for this process alone."""
        self.directory = str(directory) if is_remote(directory) else Path(directory)
        self.ahead_for = ahead_for
        self._checked = False  # whether `usable` has looked, and what it found:
        self._unusable: str | None = None  # why the store cannot be used; None: usable
        self._lock = threading.Lock()

    def usable(self) -> str | None:
        """Why the store cannot be used (said once on stderr), or None."""
        with self._lock:
            if not self._checked:
                # An object store has no directory to make private: its bucket's access decides, as for jax's
                # cache and the checkpoints beside it.
                self._unusable = None if isinstance(self.directory, str) else open_trusted_dir(
                    str(self.directory), chosen_by_user=False)  # issue 51's rule for every cache of code
                self._checked = True
                if self._unusable is not None:
                    print(f"warning: executable store {self.directory}: {self._unusable}; every restart of this "
                          "run compiles its step", file=sys.stderr)
            return self._unusable

    def _where(self, name: str) -> str | Path:
        return f"{self.directory.rstrip('/')}/{name}" if isinstance(self.directory, str) else self.directory / name

    def load(self, key: dict, mesh: Any, in_tree: Any, out_tree: Any) -> tuple[Any, str]:
        """(the loaded step, "") or (None, why not: absent, refused by key or digest, or failed to load)."""
        if self.usable() is not None:
            return None, "store unusable"
        try:
            payload, why = read_entry(self._where(entry_name(key)), key)
        except FileNotFoundError:
            return None, "absent"
        except Exception as exc:  # noqa: BLE001 - a disk's or a storage client's error: compile instead
            return None, f"unreadable ({_first_line(exc)})"
        if payload is None:
            return None, why
        try:
            from jax.experimental.serialize_executable import deserialize_and_load

            return deserialize_and_load(payload, in_tree, out_tree, execution_devices=list(mesh.devices.flat)), ""
        except Exception as exc:  # noqa: BLE001 - any loader's refusal of a foreign entry: compile instead
            return None, f"failed to load ({_first_line(exc)})"

    def save(self, key: dict, executable: Any, in_tree: Any, out_tree: Any) -> str:
        """Serialize `executable` under `key`; "" when written, else why not (one warning line too)."""
        if self.usable() is not None:
            return "store unusable"
        try:
            from jax.experimental.serialize_executable import serialize

            payload, serialized_in, serialized_out = serialize(executable)
            if (serialized_in, serialized_out) != (in_tree, out_tree):  # load passes back exactly what jax saw
                return "its arguments' structure differs from the store's"
        except Exception as exc:  # noqa: BLE001 - a step jax cannot serialize (constants, a backend without it)
            return f"not serializable ({_first_line(exc)})"
        try:
            write_entry(self.directory, entry_name(key), key, payload)
        except Exception as exc:  # noqa: BLE001 - a full disk, a storage client's error: the run goes on
            print(f"warning: executable store {self.directory}: the step was not saved ({_first_line(exc)}); the "
                  "next restart compiles it", file=sys.stderr)
            return "write failed"
        return ""


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"


class StoredStep:
    """One step's entry as StepCache.get uses it: load before compiling, save after; `why_not` says why the
    entry was not loaded ("" when it was, or with no store). The step returns (its state, a scalar loss) with
    the input state's structure, so the trees jax needs to load it come from the arguments alone."""

    def __init__(self, store: ExecutableStore | None, fingerprint: tuple, mesh: Any, args: tuple,
                 options: dict | None) -> None:
        self._store, self._mesh, self.why_not, self.saved = store, mesh, "", ""
        if store is None:
            return
        import jax

        self._key = entry_key(fingerprint, mesh, args, options)
        # --compile-only writes ahead for each process of the group that will run the step
        self._ahead = [entry_key(fingerprint, mesh, args, options, (i, store.ahead_for))
                       for i in range(store.ahead_for)] if store.ahead_for else [self._key]
        self._in_tree = jax.tree.structure((args, {}))
        self._out_tree = jax.tree.structure((args[0], 0))

    def load(self) -> Any:
        if self._store is None:
            return None
        executable, self.why_not = self._store.load(self._key, self._mesh, self._in_tree, self._out_tree)
        return executable

    def save(self, executable: Any) -> None:
        """Write the entry (each process's, ahead); `saved`: "" when every one was written, else why not."""
        if self._store is not None:
            self.saved = next((why for why in (self._store.save(key, executable, self._in_tree, self._out_tree)
                                               for key in self._ahead) if why), "")

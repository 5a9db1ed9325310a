"""The trainer ships without the launcher, the contract package is standard library only, and the storage
layer both share (elxpk_storage) imports neither of them.

Static (every import statement) and dynamic (import with everything else made unimportable) checks, so
neither a top-level nor a lazy import can pull the launcher into the trainer image, or a third-party
package into `workload create --dry-run`'s start-up path through the contract.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports(folder: str) -> list[tuple[str, str]]:
    """(file, top-level module) of every absolute import under `folder`, subpackages and lazy ones included."""
    found = []
    for py in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.append((py.relative_to(ROOT).as_posix(), node.module.split(".")[0]))
            elif isinstance(node, ast.Import):
                found.extend((py.relative_to(ROOT).as_posix(), alias.name.split(".")[0]) for alias in node.names)
    return found


def test_no_trainer_module_imports_the_launcher():
    assert [(f, m) for f, m in _imports("trainer") if m == "elxpk"] == []


def test_contract_imports_only_the_standard_library():
    allowed = set(sys.stdlib_module_names) | {"__future__", "elxpk_contract"}
    assert [(f, m) for f, m in _imports("elxpk_contract") if m not in allowed] == []


def test_the_shared_storage_layer_imports_neither_the_launcher_nor_the_trainer():
    """elxpk_storage stands below both (the trainer image ships it beside the contract): besides the standard
    library it may import only the contract and the libraries of the checkpoint directory and of gs:// (aiohttp
    and tensorstore too: elxpk_storage/client_bounds.py bounds gcsfs's and orbax's array store's own retries)."""
    allowed = set(sys.stdlib_module_names) | {"__future__", "elxpk_contract", "elxpk_storage", "etils", "fsspec",
                                              "google", "aiohttp", "tensorstore"}
    assert [(f, m) for f, m in _imports("elxpk_storage") if m not in allowed] == []


_STDLIB_ONLY = """
import importlib.abc, pkgutil, sys

class StdlibOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top not in sys.stdlib_module_names and top not in ("elxpk_contract", "trainer"):
            raise ImportError(f"blocked import of {name}")
        return None

sys.meta_path.insert(0, StdlibOnly())
import elxpk_contract
for module in pkgutil.iter_modules(elxpk_contract.__path__):
    __import__(f"elxpk_contract.{module.name}")
import trainer.__main__  # the trainer's jax-free layer (its entry point) rides on the contract alone
print(sorted(m for m in sys.modules if m.startswith("elxpk_contract.")))
"""


def test_contract_and_the_trainers_config_layer_import_with_nothing_but_the_stdlib():
    done = subprocess.run([sys.executable, "-c", _STDLIB_ONLY], cwd=ROOT, capture_output=True, text=True,
                          env={"PATH": os.environ.get("PATH", "")}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "elxpk_contract.settings" in done.stdout and "elxpk_contract.errors" in done.stdout

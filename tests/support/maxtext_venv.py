"""A cached Python >= 3.12 virtualenv holding MaxText 0.2.5 and what its train module imports.

MaxText 0.2.5 needs Python >= 3.12; the project's own venv is 3.11. `maxtext_python()` finds a 3.12+
interpreter (ELXPK_PYTHON312, then pyenv's, then python3.12/3.13 on PATH), and builds the venv once into
~/.cache/elxpk/maxtext-venv/<key>/ (ELXPK_CACHE_DIR moves it), key = the interpreter's version and the
hash of tests/maxtext_startup/requirements.txt, so a changed pin builds a fresh one. Built through
tests/support/install_cache.py: a partial folder renamed into place when complete, under a file lock (other
sessions on the machine may build at the same time), so a half-built venv is never used.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support import install_cache

REQUIREMENTS = Path(__file__).resolve().parents[1] / "maxtext_startup" / "requirements.txt"
MIN_VERSION = (3, 12)


class NoPython(RuntimeError):
    """No Python >= 3.12 on this machine (one line)."""


class BuildFailed(RuntimeError):
    """pip could not build the venv; `offline` when the package index is unreachable."""

    def __init__(self, message: str, offline: bool) -> None:
        super().__init__(message)
        self.offline = offline


OFFLINE = ("NewConnectionError", "Network is unreachable", "Name or service not known",
           "Temporary failure in name resolution", "ConnectTimeout", "Max retries exceeded", "ProxyError",
           "Connection refused", "No route to host")


def _version(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    major, minor = out.stdout.split()
    return int(major), int(minor)


def find_python() -> tuple[str, tuple[int, int]]:
    """The first Python >= 3.12 found (the oldest pyenv one first); raises NoPython."""
    candidates = [os.environ.get("ELXPK_PYTHON312", "")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if pyenv.is_dir():
        candidates += [str(p / "bin" / "python3") for p in sorted(pyenv.iterdir())]  # 3.12 first: the images' one
    candidates += [shutil.which(name) or "" for name in ("python3.12", "python3.13", "python3.14", "python3")]
    for python in filter(None, candidates):
        version = _version(python)
        if version is not None and version >= MIN_VERSION:
            return python, version
    raise NoPython("no Python >= 3.12 found (set ELXPK_PYTHON312, or install one with pyenv)")


def cache_root() -> Path:
    return install_cache.cache_root("maxtext-venv")


def venv_key(version: tuple[int, int]) -> str:
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    return f"py{version[0]}.{version[1]}-{digest}"


def maxtext_python(log=sys.stderr) -> Path:
    """The venv's python, building the venv first when it is not cached. Raises NoPython or BuildFailed."""
    base, version = find_python()
    key = venv_key(version)

    def build(partial: Path) -> None:
        print(f"building the MaxText venv in {cache_root() / key} (once; a few minutes)", file=log)
        _run([base, "-m", "venv", str(partial)])
        _run([str(partial / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
              "--only-binary=:all:", "--retries", "2", "--timeout", "60", "-r", str(REQUIREMENTS)])

    # bin/python finds its site-packages relative to itself: the venv may be built elsewhere and moved
    return install_cache.cached_build("maxtext-venv", key, build, done="bin/python") / "bin" / "python"


def _run(argv: list[str]) -> None:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        text = out.stdout + out.stderr
        last = (text.strip().splitlines() or ["(no output)"])[-1]
        raise BuildFailed(f"{' '.join(argv[:4])} ...: {last}", offline=any(s in text for s in OFFLINE))


if __name__ == "__main__":  # build (or find) it: python -m tests.support.maxtext_venv (.ci/run does)
    try:
        print(maxtext_python())
    except (NoPython, BuildFailed) as exc:
        sys.exit(f"MaxText venv: {exc}")

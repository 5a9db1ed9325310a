"""The top-level handler under the lowest and the highest typer the pins allow (pyproject: typer>=0.12,<0.29).

typer >= 0.28 vendors click as typer._click, without Abort or Exit; older typer uses click itself. The
highest is the installed one; the lowest is installed with pip into a folder put first on PYTHONPATH (typer
0.12.5 with click 8.1.8, the click it was released against), cached by its pins and this interpreter's
version under ~/.cache/elxpk/typer-lowest/ (tests/support/install_cache.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launcher.cases import CASES
from tests.support.install_cache import cached_build, content_key

LOWEST = ("typer==0.12.5", "click==8.1.8")
GOLDEN = Path(__file__).parent / "goldens" / "pathways-v5p-8.yaml"
MAIN = "import sys; from elxpk.cli.main import main; sys.exit(main())"


class _NoIndex(Exception):
    pass


def _pip_install(target: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                           *LOWEST], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise _NoIndex(done.stderr.strip()[-300:])
    (target / "installed").write_text(" ".join(LOWEST), encoding="utf-8")  # written last: the folder is complete


@pytest.fixture(scope="module")
def lowest_typer() -> str:
    key = content_key(sys.version, *LOWEST)
    try:
        return str(cached_build("typer-lowest", key, _pip_install, done="installed"))
    except _NoIndex as exc:
        pytest.skip(f"cannot install {' '.join(LOWEST)} from the package index: {exc}")


def _run(overlay: str | None, *argv: str, code: str = MAIN, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ELXPK_DEBUG")}
    environ.update(env)
    if overlay:
        environ["PYTHONPATH"] = overlay
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120,
                          env=environ, cwd=Path(__file__).parents[2])


@pytest.fixture(params=["installed", "lowest"])
def overlay(request) -> str | None:
    return request.getfixturevalue("lowest_typer") if request.param == "lowest" else None


@pytest.mark.slow
def test_the_version_under_test_is_the_one_meant(overlay):
    done = _run(overlay, code="import typer; print(typer.__version__)")
    if overlay:
        assert done.stdout.strip() == LOWEST[0].split("==")[1]
    else:
        major, minor = map(int, done.stdout.strip().split(".")[:2])
        assert (0, 12) <= (major, minor) < (0, 29)


@pytest.mark.slow
def test_render_and_version(overlay):
    done = _run(overlay, "workload", "create", *CASES["pathways-v5p-8"], "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout == GOLDEN.read_text(encoding="utf-8")
    version = _run(overlay, "--version")
    assert version.returncode == 0 and version.stdout.startswith("elxpk ")


@pytest.mark.slow
def test_usage_errors_exit_2_without_a_traceback(overlay):
    done = _run(overlay, "workload", "create", "--no-such-flag")
    assert done.returncode == 2
    assert "No such option" in done.stderr and "Traceback" not in done.stderr
    missing = _run(overlay, "workload", "status")
    assert missing.returncode == 2 and "Missing argument 'NAME'" in missing.stderr


@pytest.mark.slow
def test_an_unexpected_error_is_one_line_or_a_traceback_with_elxpk_debug(overlay):
    code = "import sys; from elxpk.cli.main import run_guarded; sys.exit(run_guarded(lambda: {}['key']))"
    done = _run(overlay, code=code)
    assert done.returncode == 1
    assert done.stderr == "error: internal error: KeyError: 'key' (set ELXPK_DEBUG=1 for the traceback)\n"
    debug = _run(overlay, code=code, ELXPK_DEBUG="1")
    assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr


@pytest.mark.slow
def test_a_bad_output_format_is_one_line(overlay):
    done = _run(overlay, "workload", "status", "x", "-o", "bad", "--kubeconfig", "/nonexistent")
    assert (done.returncode, done.stderr) == (2, "error: -o/--output 'bad': use table, json or yaml\n")

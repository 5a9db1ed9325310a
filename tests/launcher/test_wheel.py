"""The templates ship inside the wheel, and rendering works from the installed wheel, not the checkout.

The wheel is built once (offline, --no-build-isolation) and installed with --no-deps into a fresh venv
that sees the dependencies through a .pth line pointing at this interpreter's site-packages (plain
paths in a .pth are not scanned for further .pth files, so the checkout's editable install stays out).
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.launcher.cases import CASES
from tests.launcher.conftest import GOLDENS

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def installed(tmp_path_factory, repo_root) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(dist), str(repo_root)], check=True, capture_output=True, timeout=240)
    (wheel,) = dist.glob("elxpk-*.whl")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True, timeout=240)
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    deps = [p for p in site.getsitepackages() if "site-packages" in p]
    Path(purelib, "zz_deps.pth").write_text("\n".join(deps) + "\n", encoding="utf-8")
    return wheel, env_dir


def test_templates_are_in_the_wheel(installed):
    wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert "elxpk/create/templates/pathways.yaml.j2" in names
    assert "elxpk/create/templates/multi_controller.yaml.j2" in names
    # `elxpk workload validate` reads the vendored CRDs and their index from the installed package.
    for crd in ("jobset.x-k8s.io_jobsets.yaml", "pathways-job.pathways.domain_pathwaysjobs.yaml", "jobset-index.json"):
        assert f"elxpk/crds/{crd}" in names


def test_installed_wheel_renders_the_golden(installed, tmp_path):
    _, env_dir = installed
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    where = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c",
         "import elxpk.create.template_build as t; print(t.__file__); print(t.templates_dir())"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    module_file, templates = where.stdout.splitlines()
    assert module_file.startswith(str(env_dir)) and templates.startswith(str(env_dir)), where.stdout
    done = subprocess.run([str(env_dir / "bin" / "elxpk"), "workload", "create", *CASES["pathways-v5p-8"],
                           "--dry-run"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (GOLDENS / "pathways-v5p-8.yaml").read_text(encoding="utf-8")

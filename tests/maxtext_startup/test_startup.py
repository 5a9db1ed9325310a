"""What elxpk renders for MaxText against MaxText 0.2.5's own start-up (`train.initialize`: pyconfig.initialize
and validate_train_config), in both directions (issue 19).

- Every golden that runs MaxText, and every RENDERED case of corpus.py: `elxpk workload create --dry-run` runs
  as a subprocess, the pod's own `bash -c` wrapper runs the rendered command with `python3` on PATH recording
  its argv, and MaxText's start-up gets exactly that argv (and the container's M_ variables). It must accept
  it, with every value elxpk promised, computed here from the flags alone.
- Every REFUSED case: elxpk exits 2 naming the flag, and MaxText's verdict on the naive words is the one
  corpus.py records (it refuses too, or it accepts and corpus.py says why elxpk is stricter).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from elxpk_contract.exit_codes import BAD_SETTINGS
from tests.launcher.cases import CASES
from tests.launcher.conftest import GOLDENS
from tests.maxtext_startup.conftest import pod_argv
from tests.maxtext_startup.corpus import CONFIG, REFUSED, RENDERED

pytestmark = pytest.mark.slow
MODULE = "maxtext.trainers.pre_train.train"
ELXPK = str(Path(sys.executable).with_name("elxpk"))


def flag_values(flags: list[str]) -> dict[str, str | bool]:
    """--name value / --name=value / bare --name, as a dict (the last one wins; --env is not needed here)."""
    out: dict[str, str | bool] = {}
    i = 0
    while i < len(flags):
        name, eq, value = flags[i].partition("=")
        if eq:
            out[name] = value
        elif i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            out[name], i = flags[i + 1], i + 1
        else:
            out[name] = True
        i += 1
    return out


def promised(flags: list[str]) -> dict[str, object]:
    """The MaxText values docs/maxtext.md promises for these `workload create` flags."""
    f = flag_values(flags)
    if f.get("--trainer") != "maxtext":
        return {}
    out: dict[str, object] = {"elastic_enabled": int(str(f.get("--elastic-slices", 0))) > 0,
                              "enable_single_controller": "--no-pathways" not in f}
    if "--checkpoint-dir" in f:
        base, run = str(f["--checkpoint-dir"]).rstrip("/").rsplit("/", 1)
        out.update(base_output_directory=base, run_name=run, checkpoint_dir=f"{base}/{run}/checkpoints/",
                   jax_cache_dir=f"{base}/{run}/xla-cache")  # beside the checkpoints (elxpk_contract/compile_cache.py)
    if "--compilation-cache-dir" in f:
        out["jax_cache_dir"] = "" if f["--compilation-cache-dir"] == "off" else f["--compilation-cache-dir"]
    if "--checkpoint-dir" in f or "--checkpoint-period" in f:
        out["enable_checkpointing"] = True
    for flag in ("--steps", "--checkpoint-period", "--elastic-timeout-seconds", "--elastic-max-retries",
                 "--elastic-min-slice-count"):
        if flag in f:
            out[flag[2:].replace("-", "_")] = int(str(f[flag]))
    return out


def maxtext_container(manifest: str) -> dict | None:
    (jobset,) = yaml.safe_load_all(manifest)
    for job in jobset["spec"]["replicatedJobs"]:
        for container in job["template"]["spec"]["template"]["spec"]["containers"]:
            if any(MODULE in word for word in [*container.get("command", []), *container.get("args", [])]):
                return container
    return None


def maxtext_args(argv: list[str]) -> list[str]:
    """The words after `-m MODULE` in python3's argv: what MaxText's main passes on after argv[0]."""
    at = argv.index(MODULE)
    assert argv[at - 1] == "-m", argv
    return argv[at + 1:]


def m_env(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if e["name"].startswith("M_") and "value" in e}


def check_accepted(manifest: str, flags: list[str], maxtext, python_shim: Path, tmp_path: Path) -> None:
    container = maxtext_container(manifest)
    assert container is not None, "no container runs MaxText"
    argv = pod_argv(container, python_shim, tmp_path / "argv")
    reply = maxtext(maxtext_args(argv), m_env(container))
    assert reply["ok"], f"MaxText refuses what elxpk rendered: {reply['error']}\nargv: {argv}"
    got = {k: reply["values"][k] for k in promised(flags)}
    assert got == promised(flags), f"MaxText ended up with other values than elxpk promised\nargv: {argv}"


MAXTEXT_GOLDENS = sorted(name for name, flags in CASES.items() if any(MODULE in f for f in flags))


@pytest.mark.parametrize("name", MAXTEXT_GOLDENS)
def test_maxtext_accepts_every_maxtext_golden(name, maxtext, python_shim, tmp_path):
    check_accepted((GOLDENS / f"{name}.yaml").read_text(encoding="utf-8"), CASES[name], maxtext, python_shim,
                   tmp_path)


def create(flags: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([ELXPK, "workload", "create", *flags, "--dry-run"], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_what_elxpk_renders_maxtext_accepts_with_the_promised_values(name, maxtext, python_shim, tmp_path):
    done = create(RENDERED[name])
    assert done.returncode == 0, done.stderr
    check_accepted(done.stdout, RENDERED[name], maxtext, python_shim, tmp_path)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_elxpk_refuses_and_what_maxtext_says(name, maxtext):
    flags, words, env, (verdict, why) = REFUSED[name]
    done = create(flags)
    assert done.returncode == BAD_SETTINGS.code and done.stdout == "", done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors, done.stderr
    reply = maxtext([CONFIG, *words], env)
    if verdict == "refuses":
        assert not reply["ok"], f"MaxText now accepts {words}: elxpk refuses more than it must ({errors})"
        assert why in reply["error"], reply["error"]
    else:
        assert reply["ok"], f"MaxText now refuses too: {reply['error']}"

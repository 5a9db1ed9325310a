"""The launcher -> trainer contract, end to end: every golden manifest's trainer env, fed to
`python -m trainer --print-config`, resolves to exactly what the launcher's flags said.

The goldens are read at test time (they are regenerated with `pytest tests/launcher --update-goldens`);
their argv comes from tests/launcher/cases.py. Only the rendered ELXPK_* vars (plus PATH) reach the
trainer, so a setting the launcher forgets to render, renders under another name or renders in a form
the trainer parses differently fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from elxpk_contract.compile_cache import OFF, cache_dir
from elxpk_contract.settings import (
    FIELDS,
    LAUNCHER_DERIVED,
    LAUNCHER_FLAG,
    TrainerConfig,
    check_setting,
    env_name,
    exposed,
    flag_name,
)
from elxpk_storage.run_records import run_dir_beside
from tests.launcher.capacity_cases import CAPACITY_CASES
from tests.launcher.cases import CASES as RENDER_CASES

ROOT = Path(__file__).resolve().parents[2]
GOLDENS = ROOT / "tests" / "launcher" / "goldens"

CASES = {**RENDER_CASES, **CAPACITY_CASES}  # every golden in tests/launcher/goldens, by its case


def _flag(argv: list[str], name: str) -> str | None:
    """The value of `--name` in argv, given as `--name=V` or `--name V`; None when absent."""
    for i, token in enumerate(argv):
        if token == name and i + 1 < len(argv):
            return argv[i + 1]
        if token.startswith(name + "="):
            return token.split("=", 1)[1]
    return None


def expected_settings(argv: list[str]) -> dict[str, object]:
    """What `elxpk workload create ARGV` means for the trainer, read from the flags alone."""
    settings: dict[str, object] = {
        "num_slices": int(_flag(argv, "--num-slices") or 1),  # the launcher's (and xpk's) default: 1 slice
        "slice_backend": "multi-controller" if "--no-pathways" in argv or _gpu(argv) else "pathways",
        "elastic_enabled": int(_flag(argv, "--elastic-slices") or 0) > 0,
        "termination_grace_seconds": float(_flag(argv, "--termination-grace-period-seconds") or 30),
    }
    assert {f.name for f in exposed(LAUNCHER_DERIVED)} == set(settings), "a derived setting is not checked"
    for f in exposed(LAUNCHER_FLAG):
        raw = _flag(argv, flag_name(f.name))
        if raw is not None:
            value, problem = check_setting(f.name, raw)
            assert problem is None, problem
            settings[f.name] = value
    # The bundled trainer's records beside an object-store checkpoint directory (elxpk/create/render.py).
    bundled = "--trainer" in argv and _flag(argv, "--trainer") != "maxtext"
    beside = run_dir_beside(str(settings["checkpoint_dir"])) if "checkpoint_dir" in settings else None
    if bundled and beside is not None:
        settings["run_dir"] = beside
    return settings


def _pod_specs(manifest_text: str) -> dict[str, dict]:
    """replicatedJob name -> its pod spec, over every JobSet of the manifest."""
    specs = {}
    for doc in yaml.safe_load_all(manifest_text):
        if doc and doc.get("kind") == "JobSet":
            for job in doc["spec"]["replicatedJobs"]:
                specs[job["name"]] = job["template"]["spec"]["template"]["spec"]
    return specs


def _gpu(argv: list[str]) -> bool:
    """--device-type: a GPU node group, always multi-controller (Pathways runs on TPUs only)."""
    return any(a.startswith("--device-type") for a in argv)


def trainer_container(argv: list[str], manifest_text: str) -> dict | None:
    """The container that runs the trainer: the user container of the Pathways head pod, or the worker
    container with --no-pathways or --device-type; None when headless (the user runs the trainer off the cluster)."""
    specs = _pod_specs(manifest_text)
    if "--headless" in argv:
        return None
    multi = "--no-pathways" in argv or _gpu(argv)
    pods = list(specs.values()) if multi else [specs["pathways-head"]]
    user = [c for pod in pods for c in pod.get("containers", []) if not c["name"].startswith("pathways-")]
    assert len(user) == 1, f"expected one user container, found {[c['name'] for c in user]}"
    return user[0]


def _elxpk_env(container: dict) -> dict[str, str]:
    """The trainer settings a container carries as values. One comes from the cluster instead: the run's
    identity (ELXPK_RUN_ID, the attempt history's), the JobSet's UID from its pod label."""
    env = {}
    for e in container.get("env", []):
        if not e["name"].startswith("ELXPK_"):
            continue
        if "valueFrom" in e:
            assert e == {"name": "ELXPK_RUN_ID", "valueFrom": {"fieldRef": {
                "fieldPath": "metadata.labels['jobset.sigs.k8s.io/jobset-uid']"}}}, e
            continue
        env[e["name"]] = e["value"]
    return env


def print_config(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainer", "--print-config"], cwd=ROOT, capture_output=True,
                          text=True, env={**env, "PATH": os.environ.get("PATH", "")}, timeout=120)


def _golden_names() -> list[str]:
    return sorted(p.stem for p in GOLDENS.glob("*.yaml"))


def test_every_golden_has_its_case():
    assert _golden_names() and set(_golden_names()) <= set(CASES)


@pytest.mark.parametrize("name", _golden_names())
def test_rendered_trainer_env_resolves_to_what_the_flags_said(name):
    argv = CASES[name]
    manifest = (GOLDENS / f"{name}.yaml").read_text(encoding="utf-8")
    container = trainer_container(argv, manifest)
    if container is None:  # headless: no container trains, so none may carry trainer settings
        carriers = [c["name"] for pod in _pod_specs(manifest).values()
                    for c in pod.get("containers", []) + pod.get("initContainers", []) if _elxpk_env(c)]
        assert carriers == []
        return
    env = _elxpk_env(container)
    unknown = set(env) - {env_name(n) for n in FIELDS}
    assert not unknown, f"rendered env vars the trainer does not read: {sorted(unknown)}"
    done = print_config(env)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    want = expected_settings(argv)
    for setting, value in want.items():
        assert printed[setting] == value, f"{name}: {setting} is {printed[setting]!r}, the flags said {value!r}"
    # Everything the flags did not set is the trainer's default, resolved as the trainer resolves it; the cache
    # as the run will use it (the contract's rule: beside the checkpoints unless given, or "off").
    config = TrainerConfig(**want)
    expected = {**json.loads(config.to_json()),
                "compilation_cache_dir": cache_dir(config.compilation_cache_dir, config.checkpoint_path) or OFF}
    assert printed == expected

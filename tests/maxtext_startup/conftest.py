"""MaxText's own start-up as a fixture: a long-lived worker in the cached MaxText venv (Python >= 3.12).

Without a Python >= 3.12 the tier skips with one line; with CI=true it fails instead. A package index
that cannot be reached skips it the same way (fails in CI).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.maxtext_venv import BuildFailed, NoPython, maxtext_python

WORKER = Path(__file__).with_name("worker.py")
IN_CI = os.environ.get("CI", "").lower() == "true"


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"MaxText start-up tier cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"MaxText start-up tier: {reason}")


class Worker:
    def __init__(self, python: Path, cwd: Path) -> None:
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3",
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        env = {k: v for k, v in env.items() if not k.startswith("M_")}  # MaxText reads M_<KEY> itself
        self.log = open(cwd / "maxtext-worker.log", "w")  # noqa: SIM115 - lives as long as the worker
        self.proc = subprocess.Popen([str(python), str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, cwd=cwd, env=env)
        hello = self._read()
        if not hello.get("ready"):
            raise RuntimeError(f"the MaxText worker did not start: {hello}")
        self.train_py = hello["train"]

    def _read(self) -> dict:
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            self.log.flush()
            tail = Path(self.log.name).read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the MaxText worker exited ({self.proc.poll()}):\n{tail}")
        return json.loads(line)

    def initialize(self, args: list[str], env: dict[str, str] | None = None) -> dict:
        """MaxText's `initialize([train.py, *args])` with `env` (M_ variables) set: its reply."""
        self.proc.stdin.write(json.dumps({"argv": [self.train_py, *args], "env": env or {}}) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return self._read()

    def from_cli(self, words: list[str]) -> dict:
        """OmegaConf's parse of `words`, as pyconfig does it first: {key: [type name, value]}."""
        self.proc.stdin.write(json.dumps({"op": "from_cli", "words": words}) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return self._read()

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(timeout=60)
        self.log.close()


# Package scope, not session: the worker ends with this tier's tests instead of at the session's end, and its
# CPU (its MaxText and jax imports, about 30 s, counted when it is reaped) is read in this tier. Before, the
# session's last test (a config check in tests/test_xla_cache.py) carried it; --cpu-durations now also gives a
# wider fixture's teardown a row of its own (tests/support/cpu_durations.py).
@pytest.fixture(scope="package")
def maxtext_worker(tmp_path_factory) -> Iterator[Worker]:
    try:
        python = maxtext_python()
    except NoPython as exc:
        _unavailable(str(exc))
    except BuildFailed as exc:
        if exc.offline:
            _unavailable(f"the package index is unreachable ({exc})")
        pytest.fail(f"building the MaxText venv failed: {exc}", pytrace=False)
    worker = Worker(python, tmp_path_factory.mktemp("maxtext-cwd"))
    try:
        yield worker
    finally:
        worker.close()


@pytest.fixture(scope="package")
def maxtext(maxtext_worker) -> Callable[..., dict]:
    """MaxText's `initialize` on the words after `python -m maxtext.trainers.pre_train.train`: its reply."""
    return maxtext_worker.initialize


@pytest.fixture(scope="session")
def python_shim(tmp_path_factory) -> Path:
    """A folder whose `python3` (and `python`) writes its argv, NUL-separated, to $ELXPK_SHIM_OUT."""
    folder = tmp_path_factory.mktemp("shim")
    for name in ("python3", "python"):
        path = folder / name
        path.write_text('#!/bin/sh\nprintf \'%s\\0\' "$@" > "$ELXPK_SHIM_OUT"\n')
        path.chmod(0o755)
    return folder


def pod_argv(container: dict, shim: Path, out: Path) -> list[str]:
    """What `python3` receives when the pod runs `container`'s command and args (bash -c, as the pod)."""
    env = {"PATH": f"{shim}:{os.environ['PATH']}", "ELXPK_SHIM_OUT": str(out), "HOME": str(out.parent)}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
    env["PATH"] = f"{shim}:{os.environ['PATH']}"  # whatever --env said
    out.unlink(missing_ok=True)
    done = subprocess.run([*container.get("command", []), *container.get("args", [])], env=env,
                          capture_output=True, text=True, timeout=60, cwd=out.parent)
    assert out.exists(), f"the pod command never ran python3 (rc {done.returncode}): {done.stderr[-500:]}"
    return out.read_text().split("\0")[:-1]



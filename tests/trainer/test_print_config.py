"""`python -m trainer --print-config`: the resolved settings as JSON, with no jax; the same exit-2 errors
as a run. Both sides of the contract refuse the same values with the same message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from elxpk_contract.command_line import config_from_args, parse_command_line
from elxpk_contract.errors import UsageError
from elxpk_contract.settings import ACTIONS, FIELDS, TrainerConfig, check_setting

ROOT = Path(__file__).resolve().parents[2]

# Runs the main() of `python -m trainer` after making `elxpk` and `jax` unimportable, then reports (on
# stderr's last line) whether jax or numpy got imported anyway.
_BLOCKED_RUN = """
import importlib.abc, json, sys

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("elxpk", "jax", "jaxlib", "numpy", "orbax"):
            raise ImportError(f"blocked import of {name}")
        return None

sys.meta_path.insert(0, Blocker())
import trainer, trainer.__main__
code = trainer.__main__.main(sys.argv[1:])
heavy = sorted(m for m in ("jax", "numpy", "elxpk") if m in sys.modules)
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, list[str], list[str]]:
    """(exit code, stdout, stderr lines before the report, modules that should not have been imported)."""
    done = subprocess.run([sys.executable, "-c", _BLOCKED_RUN, *args], cwd=ROOT, capture_output=True, text=True,
                          env={"PATH": os.environ.get("PATH", ""), **(env or {})}, timeout=120)
    *errors, report_line = done.stderr.splitlines()
    report = json.loads(report_line)
    return report["code"], done.stdout, errors, report["heavy"]


def test_prints_the_resolved_config_without_jax_or_the_launcher(tmp_path):
    code, out, errors, heavy = _run("--print-config", "--steps", "7", "--run-dir", str(tmp_path),
                                    env={"ELXPK_STEPS": "9", "ELXPK_CHECKPOINT_PERIOD": "50",
                                         "ELXPK_FAULT": "1@3,0@save:4"})
    assert (code, errors, heavy) == (0, [], [])
    printed = json.loads(out)
    assert list(printed) == sorted(printed) == sorted(FIELDS)  # every setting, sorted, no action
    assert printed["steps"] == 7  # the flag wins over ELXPK_STEPS
    assert printed["checkpoint_period"] == 50 and printed["fault"] == ["1@3", "0@save:4"]
    assert printed["checkpoint_dir"] == str(tmp_path / "checkpoints")
    assert not list(tmp_path.iterdir()), "--print-config writes nothing"


def test_print_config_shows_the_compilation_cache_the_run_will_use(tmp_path):
    def cache(*argv: str, env: dict | None = None) -> str:
        code, out, errors, _ = _run("--print-config", "--run-dir", str(tmp_path / "run"), *argv, env=env)
        assert (code, errors) == (0, [])
        return json.loads(out)["compilation_cache_dir"]

    assert cache() == str(tmp_path / "run" / "xla-cache")  # beside RUN_DIR/checkpoints
    assert cache(env={"JAX_COMPILATION_CACHE_DIR": "/shared/xla"}) == "/shared/xla"  # the caller's, not given
    assert cache("--compilation-cache-dir", "gs://bkt/c", env={"JAX_COMPILATION_CACHE_DIR": "/x"}) == "gs://bkt/c"
    assert cache("--compilation-cache-dir", "off") == "off"


def test_print_config_is_an_action_not_a_setting():
    assert set(ACTIONS).isdisjoint(FIELDS)
    assert "print_config" not in TrainerConfig().to_dict()
    cfg, actions = parse_command_line(["--print-config", "--seed", "3"], {})
    assert actions == {"print_config"} and cfg.seed == 3
    assert parse_command_line(["--seed", "3"], {})[1] == frozenset()


# A setting's value that is no number, in the words every reader uses (elxpk_contract.setting_rules.not_a_number).
_NOT_WHOLE = ("{} '1.5': not a whole number; give a whole number, at least 1 (whole seconds to wait for slices on "
              "each attempt, e.g. 300)")


@pytest.mark.parametrize("argv, env, message", [
    (["--seed", "-1"], {}, "--seed -1: must be from 0 to 4294967295"),
    (["--elastic-timeout-seconds", "1.5"], {}, _NOT_WHOLE.format("--elastic-timeout-seconds")),
    ([], {"ELXPK_ELASTIC_TIMEOUT_SECONDS": "1.5"}, _NOT_WHOLE.format("ELXPK_ELASTIC_TIMEOUT_SECONDS")),
    ([], {"ELXPK_SEED": "-1"}, "ELXPK_SEED -1: must be from 0 to 4294967295"),  # names where the value came from
    (["--num-slices", "3", "--elastic-min-slice-count", "3", "--global-batch", "12"], {},
     "--elastic-min-slice-count 3: use -1 (wait for all 3 slices) or 1..2 (resize onto the survivors)"),
    (["--slice-backend", "tpu"], {}, "--slice-backend 'tpu': use one of simulated, pathways, multi-controller"),
])
def test_print_config_refuses_bad_settings_like_a_run(argv, env, message):
    code, out, errors, heavy = _run("--print-config", *argv, env=env)
    assert (code, out, heavy) == (2, "", [])
    assert errors == [f"error: {message}"]
    with pytest.raises(UsageError) as info:  # the very same message in-process, as a run raises it
        config_from_args(argv, env)
    assert info.value.messages == [message]


@pytest.mark.parametrize("name, raw, message", [
    ("seed", "-1", "--seed -1: must be from 0 to 4294967295"),
    ("seed", -1, "--seed -1: must be from 0 to 4294967295"),
    ("elastic_timeout_seconds", "1.5", _NOT_WHOLE.format("--elastic-timeout-seconds")),
    ("elastic_timeout_seconds", 0, "--elastic-timeout-seconds 0: must be at least 1 (whole seconds to wait for "
                                   "slices on each attempt, e.g. 300)"),
    # unit=SECONDS (row metadata, not the name) words a duration's lower bound; revive_after has no unit
    ("elastic_poll_seconds", "0", "--elastic-poll-seconds 0.0: must be a positive number of seconds"),
    ("stall_timeout_seconds", "-1", "--stall-timeout-seconds -1.0: must be a positive number of seconds"),
    ("revive_after", "-1", "--revive-after -1.0: must be 0 or more"),
])
def test_launcher_side_check_gives_the_trainers_message(name, raw, message):
    """`check_setting` is what the launcher and `local run` call: the trainer's messages, word for word."""
    assert check_setting(name, raw) == (None, message)


def test_a_closed_stdout_is_a_one_line_error():
    # The shell closes the trainer's stdout (`>&-`); a preexec_fn would fork this jax-threaded process.
    done = subprocess.run(["sh", "-c", 'exec "$0" -m trainer --print-config >&-', sys.executable], cwd=ROOT,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["error: --print-config: cannot write the configuration to standard "
                                        "output: standard output is closed"]

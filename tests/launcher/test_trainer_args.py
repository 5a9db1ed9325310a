"""`workload create --trainer --command "..."`: the extra arguments are parsed by the trainer's own parser
(elxpk_contract.command_line) before anything is rendered, and may not contradict a launcher flag (#21)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from elxpk.create.checks import parse_create
from elxpk.errors import UsageError

ELXPK = Path(sys.executable).parent / "elxpk"
BASE = dict(workload="run-1", tpu_type="v5p-8", trainer="elxpk", docker_image="gcr.io/p/trainer:1")


def problems(command: str, **flags: object) -> list[str]:
    with pytest.raises(UsageError) as info:
        parse_create(**{**BASE, **flags, "command": command})
    return info.value.messages


@pytest.mark.parametrize(("command", "says"), [
    ("--steps abc", "--command: --steps 'abc': not a whole number; give a whole number, at least 1"),
    ("--steps 0", "--command: --steps"),
    ("--frobnicate 3", "the trainer refuses it: unrecognized arguments: --frobnicate 3"),
    ("positional", "unrecognized arguments: positional"),
    ("--steps", "argument --steps: expected one argument"),
    ("--steps '5", "No closing quotation"),
    ('--run-dir "a', "No closing quotation"),
    ("--num-slices 4", "--command --num-slices: elxpk sets it from `--num-slices`"),
    ("--print-config", "--command --print-config: makes the trainer print config and exit"),
    ("--help", "--help: the trainer would print its help"),
    ("-h", "--help: the trainer would print its help"),
])
def test_what_the_trainer_would_refuse_is_refused_here(command, says):
    found = problems(command)
    assert len(found) == 1 and says in found[0], found


def test_a_setting_given_twice_with_two_values_is_refused_as_the_maxtext_path_does():
    (line,) = problems("--checkpoint-dir gs://bkt/x", checkpoint_dir="gs://bkt/y")
    assert line.startswith("--checkpoint-dir gs://bkt/y: --command also sets --checkpoint-dir gs://bkt/x")
    (line,) = problems("--steps 20", steps="10")
    assert line.startswith("--steps 10: --command also sets --steps 20")
    # the same value twice says one thing: accepted
    spec, *_ = parse_create(**BASE, checkpoint_dir="gs://bkt/y", command="--checkpoint-dir gs://bkt/y --seed 3")
    assert spec.command == "python -m trainer --checkpoint-dir gs://bkt/y --seed 3"


def test_the_console_script_refuses_with_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "m.yaml"
    done = subprocess.run([str(ELXPK), "workload", "create", "--workload", "run-1", "--tpu-type", "v5p-8",
                           "--trainer", "--docker-image", "gcr.io/p/trainer:1", "--checkpoint-dir", "gs://bkt/y",
                           "--command", "--checkpoint-dir gs://bkt/x", "--output-manifest-file", str(out),
                           "--dry-run"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "" and not out.exists()
    assert done.stderr.count("\n") == 1 and "--command also sets --checkpoint-dir gs://bkt/x" in done.stderr

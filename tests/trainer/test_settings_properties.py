"""Property tests of `python -m trainer`'s settings: random values for every row of the settings table, as a
flag and as its ELXPK_* variable, random unicode and random argv.

Whatever comes in, `python -m trainer --print-config` (the parser and every check a run makes before it
writes) exits 0 or 2; on 2 each line is an `error:` line, a single bad setting gives exactly one, and no
traceback is printed. A few cases run the real process without --print-config in an empty working
directory: a refusal there writes nothing. The seed corpus (corpus/trainer_settings.json) keeps the
hostile inputs found so far, with their expected exit codes. Example counts are bounded and derandomized.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk_contract.settings import FIELDS, env_name, flag_name

CORPUS = json.loads((Path(__file__).parent / "corpus" / "trainer_settings.json").read_text(encoding="utf-8"))
SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
ROWS = sorted(name for name, f in FIELDS.items() if not f.internal)

HOSTILE = ["", " ", "\t", "\n", "\x00", "a\x00b", "-1", "0", "1", "2", "-0", "1e400", "-1e400", "inf", "-inf",
           "nan", "1.5", "1e-400", "0x10", "1_000", "99999999999999999999999", "9" * 4400, "true", "yes", "none",
           "never", ".", "..", "/", "gs://", "gs://bkt/x", "😀", "中文", "\udcff", "\u0661", "\u2028", "a" * 5000,
           "1@3", "1@mid:999", "1@restore", "0@save:1", "1@sick:3", "1@sick:3+5", "127.0.0.1:0", "host:99999", "--steps", "=", "'", '"']
values = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=40),
                   st.integers(min_value=-(2**70), max_value=2**70).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr),
                   st.sampled_from([c for f in FIELDS.values() for c in f.choices]))


def _main(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    from trainer.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--print-config"], env)
    return code, out.getvalue(), err.getvalue()


TRAINER_FLAGS = ({flag_name(n) for n in ROWS} | {f"--no-{flag_name(n)[2:]}" for n in ROWS if FIELDS[n].type == "bool"}
                 | {"--print-config", "--help"})  # a bool setting's flag has its --no- form (BooleanOptionalAction)
_FLAG = re.compile(r"(?<![\w='-])--[a-z][a-z0-9-]*")  # not a value quoted as given: --steps '--a'


def _names_only_trainer_flags(line: str) -> bool:
    """A message of `python -m trainer` names flags `python -m trainer` has (not the launcher's or local
    run's); an unrecognised argument is quoted as given."""
    return "unrecognized arguments" in line or set(_FLAG.findall(line)) <= TRAINER_FLAGS


def _check(code: int, out: str, err: str, *, single: bool) -> None:
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err and "internal error" not in err
    if code == 0:
        assert err == "" and isinstance(json.loads(out), dict)
        return
    lines = err.splitlines()
    assert out == "" and lines and all(line.startswith("error: ") for line in lines), err
    assert all(_names_only_trainer_flags(line) for line in lines), err
    if single:
        assert len(lines) == 1, lines


@SETTINGS
@given(name=st.sampled_from(ROWS), value=values, as_env=st.booleans())
def test_any_value_of_any_setting_exits_0_or_2_with_one_line(name, value, as_env):
    if as_env:
        if "\x00" in value or "\udcff" in value:
            return  # no process environment can hold these
        code, out, err = _main([], {env_name(name): value})
    else:
        code, out, err = _main([f"{flag_name(name)}={value}"], {})
    _check(code, out, err, single=True)
    if code == 2:
        assert (env_name(name) if as_env else flag_name(name)) in err or "fault" in name or name in (
            "num_slices", "d_model", "n_heads", "global_batch", "seq_len", "steps", "coordinator", "model",
            "elastic_min_slice_count", "devices_per_slice", "process_id", "num_processes", "slice_backend",
            "compile_topology")  # its form is checked with the config, by flag name, as --coordinator's


@SETTINGS
@given(argv=st.lists(st.one_of(st.sampled_from([flag_name(n) for n in ROWS]), values), max_size=6),
       env=st.dictionaries(st.sampled_from([env_name(n) for n in ROWS]),
                           values.filter(lambda v: "\x00" not in v and "\udcff" not in v), max_size=3))
def test_random_argv_and_env_exit_0_or_2(argv, env):
    _check(*_main(argv, env), single=False)


@pytest.mark.parametrize("case", CORPUS["cases"], ids=lambda c: json.dumps([c["argv"], c["env"]])[:60])
def test_seed_corpus(case):
    code, out, err = _main(case["argv"], case["env"])
    assert code == case["code"], err
    _check(code, out, err, single=True)


REAL = [["--checkpoint-dir", " "], ["--run-dir="], ["--revive-after", "1e400"], ["--steps", "5", "--fault", "1@mid:5"],
        ["--data", "\t"], ["--seed", "-1"], ["--no-such-flag"]]


@pytest.mark.parametrize("argv", REAL, ids=lambda a: " ".join(a)[:40])
def test_real_process_refusal_writes_nothing(tmp_path, argv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELXPK_")}
    done = subprocess.run([sys.executable, "-m", "trainer", *argv], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []

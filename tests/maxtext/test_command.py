"""Finding the MaxText run in a shell command, and splicing overrides into it without touching the rest."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elxpk.maxtext.command import (
    CommandError,
    find_invocations,
    insert,
    is_maxtext_command,
    quote,
    split_words,
)
from tests.conftest import REPO_ROOT

MODULE = "maxtext.trainers.pre_train.train"
CFG = "src/maxtext/configs/base.yml"


def only(command: str):
    found = find_invocations(command)
    assert len(found) == 1, found
    return found[0]


def spliced(command: str, tokens: list[str]) -> str:
    return insert(command, only(command).insert_at, tokens)


@pytest.mark.parametrize("command", [
    f"python3 -m {MODULE} {CFG}",
    f"python -m {MODULE} {CFG} steps=10",
    f"python3.12 -u -m {MODULE} {CFG}",
    f"/usr/bin/python3 -X dev -m{MODULE} {CFG}",
    f"JAX_PLATFORMS=cpu XLA_FLAGS='--a --b' python3 -m {MODULE} {CFG}",
    f"exec env A=1 python3 -m {MODULE} {CFG}",
    "python3 -m MaxText.train MaxText/configs/base.yml run_name=r",
    "python3 -m MaxText.elastic_train MaxText/configs/base.yml",
    "python3 /deps/src/MaxText/train.py MaxText/configs/base.yml",
    "python3 src/maxtext/trainers/pre_train/train.py src/maxtext/configs/base.yml",
    f"cd /deps && python3 -m {MODULE} {CFG} && echo done",
])
def test_recognised_invocations(command):
    assert is_maxtext_command(command)
    inv = only(command)
    assert inv.program.value.endswith(("train", "train.py", "elastic_train", "elastic_train.py"))


@pytest.mark.parametrize("command", [
    "python -m trainer --steps 5",
    "python3 train.py config.yml steps=5",  # some other train.py
    "bash run.sh",
    f"python3 -c 'print(1)' {MODULE}.py",
    "echo maxtext",
    f"python3 -m {MODULE}_other {CFG}",
])
def test_not_maxtext(command):
    assert find_invocations(command) == []
    assert not is_maxtext_command(command)


def test_hidden_inside_bash_c_is_maxtext_but_not_editable():
    command = f"bash -c 'python3 -m {MODULE} {CFG}'"
    assert is_maxtext_command(command)
    assert find_invocations(command) == []


def test_quoted_values_keep_their_quoting_and_read_as_the_shell_reads_them():
    command = f"python3 -m {MODULE} {CFG} run_name='my run' dataset_path=\"gs://bkt/x y\" steps=5"
    inv = only(command)
    assert inv.value("run_name") == "my run"
    assert inv.value("dataset_path") == "gs://bkt/x y"
    assert inv.value("steps") == "5"
    out = spliced(command, ["checkpoint_period=100"])
    assert out == f"python3 -m {MODULE} {CFG} checkpoint_period=100 run_name='my run' dataset_path=\"gs://bkt/x y\" steps=5"


def test_extra_spaces_and_tabs():
    command = f"   python3   -m\t{MODULE}     {CFG}    steps=5   "
    out = spliced(command, ["a=1", "b=2"])
    assert out == f"   python3   -m\t{MODULE}     {CFG} a=1 b=2    steps=5   "
    assert shlex.split(out)[4:7] == ["a=1", "b=2", "steps=5"]


def test_chained_commands_get_the_overrides_inside_the_maxtext_run_only():
    command = (f"pip install -q x && python3 -m {MODULE} {CFG} steps=5 && gsutil cp log gs://bkt/ ; "
               "echo steps=7 | tee out")
    out = spliced(command, ["checkpoint_period=100"])
    assert out.startswith(f"pip install -q x && python3 -m {MODULE} {CFG} checkpoint_period=100 steps=5 && gsutil")
    assert out.endswith("; echo steps=7 | tee out")
    assert only(command).value("steps") == "5"  # the `echo steps=7` is another command


def test_without_config_file_overrides_go_after_the_module():
    command = f"python3 -m {MODULE} steps=5"
    inv = only(command)
    assert inv.config is None
    assert spliced(command, ["a=1"]) == f"python3 -m {MODULE} a=1 steps=5"


def test_redirections_pipes_and_background_are_not_arguments():
    command = f"python3 -m {MODULE} {CFG} steps=5 > /tmp/log 2>&1 &>all.log | tee x &"
    inv = only(command)
    assert set(inv.overrides) == {"steps"}
    words = [w.raw for w in split_words(command)]
    assert "2>&1" in words and "&>all.log" in words and words[-1] == "&"


def test_dynamic_words_are_one_word_and_marked():
    command = (f"python3 -m {MODULE} {CFG} run_name=$(date +%s-%N) base_output_directory=\"$BUCKET/x\" "
               "steps=`cat n` model_name=${MODEL:-qwen3 0.6b}")
    inv = only(command)
    assert inv.overrides["run_name"].raw == "run_name=$(date +%s-%N)"
    assert inv.overrides["model_name"].raw == "model_name=${MODEL:-qwen3 0.6b}"
    assert all(inv.overrides[k].dynamic for k in ("run_name", "base_output_directory", "steps", "model_name"))
    assert not inv.config.dynamic


def test_comments_and_line_continuations():
    command = f"# launch\npython3 -m {MODULE} {CFG} \\\n  steps=5 # run_name=x\necho done"
    inv = only(command)
    assert set(inv.overrides) == {"steps"}
    assert spliced(command, ["a=1"]).startswith(f"# launch\npython3 -m {MODULE} {CFG} a=1 \\\n  steps=5")


def test_env_assignments_before_the_interpreter_are_recorded():
    inv = only(f"M_CHECKPOINT_PERIOD=5 JAX_X=1 python3 -m {MODULE} {CFG}")
    assert set(inv.env) == {"M_CHECKPOINT_PERIOD", "JAX_X"}


def test_two_runs_are_both_found():
    assert len(find_invocations(f"python3 -m {MODULE} {CFG} && python3 -m {MODULE} {CFG} steps=2")) == 2


@pytest.mark.parametrize("command", [f"python3 -m {MODULE} {CFG} run_name='x", f'python3 -m {MODULE} "{CFG}',
                                     f"python3 -m {MODULE} {CFG} run_name=$(date"])
def test_unclosed_quotes_are_an_error(command):
    with pytest.raises(CommandError):
        find_invocations(command)


@pytest.mark.parametrize("token", ["run_name=a b", "x='q'", 'p="$HOME"', "v=`id`", "plain=1", "semi=a;b&&c"])
def test_quote_makes_one_literal_word_the_shell_reads_back(token):
    command = spliced(f"python3 -m {MODULE} {CFG}", [token])
    echoed = subprocess.run(["bash", "-c", command.replace(f"python3 -m {MODULE}", "printf '%s\\n'")],
                            capture_output=True, text=True, check=True).stdout.split("\n")
    assert echoed[:2] == [CFG, token]
    assert quote("plain=1") == "plain=1"


def test_spliced_command_still_finds_the_same_run_with_the_new_overrides():
    command = f"cd /x && python3 -m {MODULE} {CFG} steps=5 | tee log"
    inv = only(spliced(command, ["checkpoint_period=100", "run_name=a b"]))
    assert inv.value("checkpoint_period") == "100" and inv.value("run_name") == "a b" and inv.value("steps") == "5"


def test_package_imports_no_jax_kubernetes_or_google():
    probe = ("import sys, elxpk.maxtext.overrides, elxpk.maxtext.metrics, elxpk.maxtext.keys\n"
             "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('jax', 'jaxlib', 'kubernetes', 'google', 'numpy', 'yaml'))))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=60, check=True).stdout.strip()
    assert out == ""


# ---- property: splicing changes nothing but the inserted words ------------------------------------------

_plain = st.text(alphabet=st.sampled_from("abcxyz019_-./:"), min_size=1, max_size=8)
_value = st.one_of(_plain, _plain.map(lambda t: f"'{t} {t}'"), _plain.map(lambda t: f'"{t}"'),
                   _plain.map(lambda t: f"$X{t.replace('-', '').replace('.', '').replace('/', '').replace(':', '')}"))
_override = st.tuples(st.sampled_from(["steps", "run_name", "dataset_type", "packing"]), _value).map("=".join)
_space = st.sampled_from([" ", "  ", "\t", " \\\n  "])
_chain = st.sampled_from(["", "cd /app && ", "export A=1; ", "JAX_X=1 "])
_tail = st.sampled_from(["", " && echo done", " 2>&1 | tee log", " > out &", " # note=1"])


@settings(max_examples=200, deadline=None)
@given(_chain, _space, st.lists(_override, max_size=4), _tail,
       st.lists(st.tuples(st.sampled_from(["a", "b_c", "run_name"]), _plain), min_size=1, max_size=3))
def test_splicing_keeps_the_rest_of_the_command_and_adds_exactly_the_tokens(prefix, sep, extra, tail, new):
    command = prefix + sep.join(["python3", "-m", MODULE, CFG, *extra]) + tail
    before = only(command)
    tokens = [f"{k}={v} x" for k, v in new]
    out = spliced(command, tokens)
    added = out[before.insert_at:len(out) - (len(command) - before.insert_at)]
    assert out[:before.insert_at] == command[:before.insert_at]
    assert out[before.insert_at + len(added):] == command[before.insert_at:]
    assert shlex.split(added) == tokens
    after = only(out)
    for key, word in before.overrides.items():
        if key not in dict(new):
            assert after.overrides[key].raw == word.raw
    for k, v in dict(new).items():  # a key given twice: the later word wins, as in MaxText
        if k not in before.overrides:
            assert after.value(k) == f"{v} x"

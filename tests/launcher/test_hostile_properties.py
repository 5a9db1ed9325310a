"""Property-based tests over the CLI's readers and parsers (issue #21): random bytes, random YAML and JSON,
random unicode, and the seed corpus in hostile_corpus/, fed to every reader of elxpk as the user reaches
it (the real entry point, `elxpk.cli.main.main`, in process), plus random values for each `workload
create` flag (every row of the settings table the launcher exposes among them).

Each run must end in a documented exit code (0, 1 or 2), with no traceback and no "internal error", every
stderr line a one-line `error:`/`warning:`/`note:`, and nothing written when it refuses. Derandomized with a
bounded example count so CI is stable; the memory and time bounds of the large and special inputs are
measured in test_hostile_input.py, one process each.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk.cli.main import main, run_guarded
from tests.support.run_writer import FakeRun, write_run

CORPUS = Path(__file__).parent / "hostile_corpus"
CORPUS_FILES = sorted(p for p in CORPUS.iterdir() if p.name != "README.md")
GOOD = ["--workload", "run-1", "--tpu-type", "v5p-8", "--command", "python3 train.py"]
DOCUMENTED = {0, 1, 2}
# The deadline bounds each example's time (generous: a loaded 2-core CI machine), not a speed claim.
PROPERTY = settings(max_examples=25, derandomize=True, database=None, deadline=timedelta(seconds=30),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large])

# --- inputs ---------------------------------------------------------------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                     st.text(max_size=30))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=10), inner, max_size=5)), max_leaves=25)
_keys = ("apiVersion", "kind", "metadata", "spec", "items", "id", "cause", "step", "loss", "project",
         "clusters", "users", "contexts", "current-context", "time", "event", "run_name", "learning/loss")
# Objects shaped like what each reader expects (the keys it looks for), with values of any type.
_records = st.dictionaries(st.sampled_from(_keys), _values, max_size=6)


def _yaml(value: object) -> str:
    return yaml.safe_dump(value, allow_unicode=True)


def _json_lines(values: list) -> str:
    return "".join(json.dumps(v, allow_nan=True) + "\n" for v in values)


CONTENTS = st.one_of(
    st.binary(max_size=600),
    st.text(max_size=400),
    _records.map(_yaml),
    st.lists(_records, max_size=4).map(lambda docs: yaml.safe_dump_all(docs, allow_unicode=True)),
    st.lists(_records, max_size=5).map(_json_lines),
    _values.map(lambda v: json.dumps(v, allow_nan=True) + "\n"),
)

# --- readers: each takes a file with the content and runs elxpk as a user would ----------------------------------


@contextlib.contextmanager
def _env(name: str, value: str):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _kubeconfig(path: Path, work: Path) -> tuple[int, str, str]:
    """The kubeconfig reader: connect() builds the client from the file (no request is sent)."""
    from elxpk.cluster.access.connect import connect
    from elxpk.cluster.access.target import ClusterTarget

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_guarded(lambda: connect(ClusterTarget(kubeconfig=str(path)), resolved=True) and 0)
    return code, out.getvalue(), err.getvalue()


def _in_run(name: str) -> Callable[[Path, Path], tuple[int, str, str]]:
    """A run directory whose `name` (metrics.jsonl, events.jsonl or run.json) is the content."""
    def read(path: Path, work: Path) -> tuple[int, str, str]:
        run = work / "run"
        shutil.copytree(work / "good-run", run)
        shutil.copyfile(path, run / name)
        return _run(["report", str(run), "--no-png"])
    return read


READERS: dict[str, Callable[[Path, Path], tuple[int, str, str]]] = {
    "manifest": lambda p, w: _run(["workload", "validate", str(p)]),
    "env-file": lambda p, w: _run(["workload", "create", *GOOD, "--env-file", str(p), "--dry-run",
                                   "--output-manifest-file", str(w / "out.yaml")]),
    "kubeconfig": _kubeconfig,
    "ELXPK_CONFIG": lambda p, w: _with_config(p),
    "incidents": lambda p, w: _run(["report", str(w / "good-run"), "--incidents", str(p), "--no-png"]),
    "metrics": _in_run("metrics.jsonl"),
    "events": _in_run("events.jsonl"),
    "run.json": _in_run("run.json"),
    "maxtext-metrics": lambda p, w: _run(["report", str(p), "--no-png"]),
}


def _with_config(path: Path) -> tuple[int, str, str]:
    with _env("ELXPK_CONFIG", str(path)):
        return _run(["workload", "create", *GOOD, "--dry-run"])


def check(code: int, out: str, err: str, work: Path, before: set[str]) -> None:
    assert code in DOCUMENTED, (code, err)
    for bad in ("Traceback", "internal error", "unexpected error"):
        assert bad not in err and bad not in out, err
    for line in err.splitlines():
        assert line.startswith(("error: ", "warning: ", "note: ", "wrote ", "#")), line
    if code == 2:  # refused: nothing written beside the inputs (`run` is one: a copy made for the reader)
        assert {p.name for p in work.iterdir()} - {"run"} == before, err
        if (work / "run").is_dir():
            assert not (work / "run" / "report.png").exists()


@pytest.fixture(scope="module")
def good_run(tmp_path_factory) -> Path:
    return write_run(tmp_path_factory.mktemp("runs") / "good-run", FakeRun(steps=6))


def _workdir(tmp_path: Path, good_run: Path) -> Path:
    work = tmp_path / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    shutil.copytree(good_run, work / "good-run")
    return work


def _feed(reader: str, content: bytes | str, tmp_path: Path, good_run: Path) -> None:
    work = _workdir(tmp_path, good_run)
    path = tmp_path / "input"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    before = {p.name for p in work.iterdir()}
    code, out, err = READERS[reader](path, work)
    check(code, out, err, work, before)
    if reader == "run.json" or reader == "metrics" or reader == "events":
        shutil.rmtree(work / "run", ignore_errors=True)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_the_seed_corpus_through_every_reader(reader, tmp_path, good_run):
    for path in CORPUS_FILES:
        _feed(reader, path.read_bytes(), tmp_path, good_run)


@pytest.mark.parametrize("reader", sorted(READERS))
@PROPERTY
@given(content=CONTENTS)
def test_random_content_through_every_reader(reader, content, tmp_path, good_run):
    _feed(reader, content, tmp_path, good_run)


# --- flags: random values for each `workload create` flag -------------------------------------------------------


def _create_flags() -> list[tuple[str, bool]]:
    """(flag, is_boolean) of every option of `workload create`, as built for the command line."""
    import typer.main

    from elxpk.cli.commands import build_app

    root = typer.main.get_command(build_app(["workload", "create"]))
    create = root.commands["workload"].commands["create"]  # type: ignore[attr-defined]
    return [(max(p.opts, key=len), bool(getattr(p, "is_flag", False))) for p in create.params
            if p.param_type_name == "option" and p.name != "help"]


CREATE_FLAGS = _create_flags()


def _repeatable_create_flags() -> set[str]:
    """The options given once per value (`--env`, `--pathways-proxy-env`, ...): twice is no mistake there."""
    import typer.main

    from elxpk.cli.commands import build_app

    root = typer.main.get_command(build_app(["workload", "create"]))
    create = root.commands["workload"].commands["create"]  # type: ignore[attr-defined]
    return {max(p.opts, key=len) for p in create.params if getattr(p, "multiple", False)}


REPEATABLE = _repeatable_create_flags()
_flag_values = st.one_of(st.text(max_size=40), st.sampled_from(["", " ", "-1", "0", "1e400", "nan", "inf", "-",
                                                                 "--dry-run", "1" * 30, "/dev/zero", ".", "/"]))


@PROPERTY
@given(flag=st.sampled_from([f for f, boolean in CREATE_FLAGS if not boolean]), value=_flag_values,
       twice=st.booleans())
def test_random_values_for_each_create_flag(flag, value, twice, tmp_path):
    out = tmp_path / "manifest.yaml"
    if out.exists():
        out.unlink()
    base = [token for pair in zip(GOOD[::2], GOOD[1::2], strict=True) if pair[0] != flag for token in pair]
    given_flag = [flag, value] * (2 if twice else 1)
    code, stdout, err = _run(["workload", "create", *base, *given_flag, "--dry-run",
                              *([] if flag == "--output-manifest-file" else ["--output-manifest-file", str(out)])])
    assert code in (0, 2), (flag, value, err)
    for bad in ("Traceback", "internal error", "unexpected error"):
        assert bad not in err, err
    if code == 2:
        assert not out.exists() and stdout == "", (flag, value)
        assert all(line.startswith("error: ") for line in err.splitlines()), err
    if twice and flag not in REPEATABLE:
        assert code == 2 and f"{flag}: given 2 times" in err


def test_every_create_flag_is_covered():
    assert len(CREATE_FLAGS) > 45 and {"--checkpoint-dir", "--steps", "--env-file", "--kubeconfig"} <= {
        f for f, _ in CREATE_FLAGS}


PLAN = ["--num-slices", "8", "--slice-mtbf", "30d", "--step-time", "2s", "--checkpoint-save", "20s", "--restore",
        "60s"]


def _plan_flags() -> list[str]:
    import typer.main

    from elxpk.cli.commands import build_app

    plan = typer.main.get_command(build_app(["plan"])).commands["plan"]  # type: ignore[attr-defined]
    return [max(p.opts, key=len) for p in plan.params
            if p.param_type_name == "option" and p.name != "help" and not getattr(p, "is_flag", False)]


@PROPERTY
@given(flag=st.sampled_from(_plan_flags()), value=_flag_values)
def test_random_values_for_each_plan_flag(flag, value, tmp_path):
    base = [token for pair in zip(PLAN[::2], PLAN[1::2], strict=True) if pair[0] != flag for token in pair]
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = _run(["plan", *base, flag, value])
    assert code in (0, 2), (flag, value, err)
    for bad in ("Traceback", "internal error", "unexpected error"):
        assert bad not in err, err
    if code == 2:
        assert out == "" and all(line.startswith("error: ") for line in err.splitlines()), err
        assert sorted(p.name for p in tmp_path.iterdir()) == before

"""Every command that README.md and docs/*.md show is run here as written, or is said here why it is not
(it needs a cluster, GCS or a file the page does not make; it is a synopsis; `.ci/run` runs it).

A command is a line of a shell or plain fenced block (a `$ ` prompt is dropped) whose program is `elxpk`
with one of its commands, `python`/`python3` or `.venv/bin/...` (line continuations joined). A `$ ` transcript whose
output lines all start with `error: ` is a refusal: it must exit 2 and print exactly those lines. The
commands of the pages run in order in one working directory, with the venv's programs on PATH (the README
says `source .venv/bin/activate`) and `.venv` naming this venv, so a page's later command sees what an
earlier one wrote (`> jobset.yaml`, then `validate jobset.yaml`). The 300-step runs (the README's demo,
the trainer's examples, and what reads their run directories) are the slow test.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.realcluster.test_try_without_cloud import section_span

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
VENV_BIN = Path(sys.executable).parent

# Why a command is not run here, by rule (first match wins): each says where the command does run.
NOT_RUN = (
    ("run by .ci/run itself (it installs the venv and runs the suite)",
     re.compile(r"^(python3 -m venv \.venv|\.venv/bin/pip install|\.venv/bin/python -m pytest)")),
    ("a synopsis or a fragment: placeholders, [optional] parts or `...`",
     re.compile(r"((^|\s)\.\.\.|\[|\b(RUN_DIR|RUN_A|RUN_B|FILE|D)\b)")),
    ("needs a cluster: a verb that reads or changes a workload on one",
     re.compile(r"^elxpk (workload|job) (status|events|kill-slice|wait|list|delete|logs|cancel|inspect)\b")),
    ("needs GCS: reads a gs:// bucket",
     re.compile(r"^elxpk checkpoint inspect gs://")),
    ("needs the MaxText image (the MaxText start-up tier runs MaxText's own code: tests/maxtext_startup)",
     re.compile(r"^python3 -m maxtext\.")),
    ("needs the xpk render it names (the same violations are tests/launcher/test_admission.py's cases)",
     re.compile(r"^elxpk workload validate xpk-jobset\.yaml$")),
    ("needs Go and minutes: .ci/run builds, starts and stops the control plane (tests/realcluster)",
     re.compile(r"^python tools/testcluster (build|up|cpu|down)\b")),
    ("the bench script: bench/ is run by hand, its ratios printed against a baseline in the same run",
     re.compile(r"^\.venv/bin/python bench/")),
)
# The README's "Try the cluster verbs without a cloud": one script, build to report, that needs the tier's
# cluster; its own test runs it in order, as written (the markers' line numbers bound it).
RUN_BY_TRY_TEST = "run by tests/realcluster/test_try_without_cloud.py, in order, on the real-cluster tier's cluster"
TRY_WITHOUT_CLOUD = section_span()
# The long runs: 300 steps each, and what reads their run directories (the slow test runs them in order).
LONG = re.compile(r"^(\.venv/bin/)?elxpk (local run( --run-dir ref --no-faults| --plain --run-dir rewind .*)?$|"
                  r"compare ref elxpk-run$|report elxpk-run\b|plan --from-run elxpk-run\b)|"
                  r"^python -m trainer --model micro --run-dir runs/")
PROGRAM = re.compile(r"^(\.venv/bin/\S+|elxpk|python3?|tools/testcluster)(\s|$)")
SHELL_FENCES = ("", "bash", "sh", "console", "shell")  # not yaml, json or python: their lines are no commands
ELXPK_COMMANDS = ("local", "workload", "plan", "report", "compare", "checkpoint", "translate", "job", "--version")


@dataclass(frozen=True)
class DocCommand:
    page: str
    line: int
    text: str  # as written, continuations joined, trailing comment kept (bash drops it)
    errors: tuple[str, ...]  # a refusal transcript's lines

    @property
    def bare(self) -> str:
        """The command without its comment and redirection, for the rules."""
        return re.split(r"\s+(#|>)\s", self.text, maxsplit=1)[0].strip()

    def why_not_run(self) -> str | None:
        if self.page == "README.md" and TRY_WITHOUT_CLOUD[0] < self.line < TRY_WITHOUT_CLOUD[1]:
            return RUN_BY_TRY_TEST
        return next((why for why, rule in NOT_RUN if rule.search(self.bare)), None)


def _is_command(text: str) -> bool:
    if not PROGRAM.match(text):
        return False
    words = text.split()
    if words[0] == "elxpk":  # not a layout line (`elxpk/  the launcher`) or a table of figures
        return len(words) > 1 and words[1] in ELXPK_COMMANDS
    return True


def doc_commands() -> list[DocCommand]:
    found = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        fence: str | None = None
        i = 0
        while i < len(lines):
            raw = lines[i]
            if raw.lstrip().startswith("```"):
                fence = None if fence is not None else raw.strip()[3:]
                i += 1
                continue
            stripped = raw.strip()
            prompt = stripped.startswith("$ ")
            if fence not in SHELL_FENCES:
                i += 1
                continue
            text, start = stripped.removeprefix("$ "), i
            while text.endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text[:-1].rstrip() + " " + lines[i].strip()
            errors: list[str] = []
            while prompt and i + 1 < len(lines) and lines[i + 1].startswith("error: "):
                i += 1
                errors.append(lines[i])
            # The README's first command is the install, then the main job: two commands.
            for part in text.split(" && ") if text.startswith("python3 -m venv .venv && ") else (text,):
                if _is_command(part):
                    found.append(DocCommand(page.relative_to(ROOT).as_posix(), start + 1, part, tuple(errors)))
            i += 1
    return found


def _run(command: DocCommand, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "200"}
    env.pop("KUBECONFIG", None)  # a doc command never reaches someone's real cluster
    return subprocess.run(["bash", "-c", command.text], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)


def _check(command: DocCommand, done: subprocess.CompletedProcess[str]) -> None:
    where = f"{command.page}:{command.line}: {command.text}"
    if command.errors:
        assert done.returncode == 2, (where, done.stderr[-2000:])
        assert done.stderr.splitlines() == list(command.errors), where
        return
    expected = re.search(r"#\s*exit (\d+)", command.text)
    assert done.returncode == int(expected.group(1) if expected else 0), (where, done.stderr[-2000:])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("doc-commands")
    (path / ".venv").symlink_to(Path(sys.prefix))  # `.venv/bin/elxpk` as the README writes it
    return path


def test_every_doc_command_is_classified():
    """What the rules and LONG leave is run by the quick test: this lists the split, and checks that the
    pages still hold the commands the rules were written for (a rule that matches nothing is stale)."""
    commands = doc_commands()
    assert len(commands) >= 40, "the command extraction found too few: has the page format changed?"
    matched = {why: 0 for why, _ in NOT_RUN}
    for command in commands:
        why = command.why_not_run()
        if why is not None:
            matched[why] = matched.get(why, 0) + 1
    assert all(matched.values()), [why for why, n in matched.items() if not n]
    tried = [c.bare for c in commands if c.why_not_run() == RUN_BY_TRY_TEST]
    assert any(c.startswith("elxpk workload kill-slice") for c in tried) and any(
        c.startswith("elxpk report") for c in tried), tried
    assert sum(1 for c in commands if c.why_not_run() is None and LONG.search(c.bare)) >= 5


def test_the_doc_commands_run_as_written(workdir: Path):
    """The quick ones: renders, refusals, the planner, the trainer's refusals, gpu.md, validate of a render."""
    ran = 0
    for command in doc_commands():
        if command.why_not_run() is not None or LONG.search(command.bare):
            continue
        _check(command, _run(command, workdir))
        ran += 1
    assert ran >= 10


def _long_commands() -> list[DocCommand]:
    """The long ones in page order, each once (docs/local.md repeats the README's demo)."""
    seen: set[str] = set()
    out = []
    for command in doc_commands():
        if command.why_not_run() is not None or not LONG.search(command.bare):
            continue
        argv = " ".join(shlex.split(command.bare.removeprefix(".venv/bin/")))
        if argv not in seen:
            seen.add(argv)
            out.append(command)
    return out


@pytest.fixture(scope="module")
def long_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("doc-long-commands")
    (path / ".venv").symlink_to(Path(sys.prefix))
    return path


@pytest.mark.slow
@pytest.mark.timeout(900)  # one 300-step run each, on a loaded 2-core machine
@pytest.mark.parametrize("command", _long_commands(), ids=lambda c: f"{c.page}:{c.line}")
def test_the_long_doc_commands_run_as_written(command: DocCommand, long_workdir: Path):
    """The README's demo (local run, the reference run, compare, report), the planner on its run dir, the
    rewinding transcript and the trainer's own examples, in page order in one directory (a later command
    reads what an earlier one wrote), each with its documented exit code."""
    _check(command, _run(command, long_workdir))


def test_the_long_commands_include_the_readme_demo():
    argvs = {" ".join(shlex.split(c.bare.removeprefix(".venv/bin/"))) for c in _long_commands()}
    assert {"elxpk local run", "elxpk local run --run-dir ref --no-faults", "elxpk compare ref elxpk-run",
            "elxpk report elxpk-run"} <= argvs

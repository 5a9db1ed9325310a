"""Static checks of trainer/Dockerfile: it parses, runs the trainer as non-root, pins what pyproject pins,
and ships the trainer, the contract package and of the launcher only its checkpoint inspection (never its CLI)."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import dockerfile
import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
# The repository's packages: an import of one of them must find it in the image.
PROJECT_PACKAGES = ("elxpk", "elxpk_contract", "elxpk_storage", "trainer")
DOCKERFILE = ROOT / "trainer" / "Dockerfile"
# Instructions Docker's builder accepts (the Go parser itself accepts any word).
KNOWN = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER",
         "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "MAINTAINER"}
_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(.*)$")


def _name(req: str) -> tuple[str, str, str]:
    m = _REQ.match(req.strip())
    assert m, f"unparsable requirement {req!r}"
    return re.sub(r"[-_.]+", "-", m.group(1)).lower(), (m.group(2) or "").strip("[]"), m.group(3).replace(" ", "")


@pytest.fixture(scope="module")
def commands():
    return dockerfile.parse_file(str(DOCKERFILE))


def _pip_installs(commands) -> list[list[str]]:
    out = []
    for c in commands:
        if c.cmd == "RUN" and "pip" in c.value[0] and "install" in c.value[0]:
            tokens = shlex.split(" ".join(c.value))
            out.append(tokens[tokens.index("install") + 1:])
    return out


def test_parses_with_known_instructions_from_first(commands):
    assert commands[0].cmd in ("FROM", "ARG")
    assert {c.cmd for c in commands} <= KNOWN


def test_entrypoint_runs_the_trainer_module(commands):
    entry = [c for c in commands if c.cmd == "ENTRYPOINT"]
    assert len(entry) == 1 and entry[0].json, "one exec-form ENTRYPOINT (signals reach python directly)"
    assert list(entry[0].value) == ["python", "-m", "trainer"]
    main = ROOT / "trainer" / "__main__.py"
    assert main.is_file(), "python -m trainer needs trainer/__main__.py"
    ast.parse(main.read_text())


def test_runs_as_non_root(commands):
    users = [c.value[0] for c in commands if c.cmd == "USER"]
    assert users, "the image must switch to a non-root user"
    assert users[-1].split(":")[0] not in ("root", "0")
    entry_line = next(c.start_line for c in commands if c.cmd == "ENTRYPOINT")
    user_line = max(c.start_line for c in commands if c.cmd == "USER")
    assert user_line < entry_line
    assert not [c for c in commands if c.cmd == "RUN" and c.start_line > user_line], "no RUN after USER"


def test_pins_match_pyproject_trainer_extra(commands):
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["trainer"]
    want = {n: spec for n, _, spec in map(_name, extra)}
    installs = _pip_installs(commands)
    assert installs, "no pip install found"
    got: dict[str, tuple[str, str]] = {}
    for args in installs:
        for arg in args:
            if not arg.startswith("-"):
                name, extras, spec = _name(arg)
                got[name] = (extras, spec)
    assert {n: s for n, (_, s) in got.items()} == want
    assert "tpu" in got["jax"][0].split(","), "JAX for TPU: install jax[tpu]"


def test_no_registry_host_in_pip_commands(commands):
    for args in _pip_installs(commands):
        for arg in args:
            assert not re.match(r"^(-i|--index-url|--extra-index-url|-f|--find-links|--trusted-host)\b", arg), arg
            assert "://" not in arg, arg


def _sources(commands) -> list[Path]:
    copies = [c for c in commands if c.cmd == "COPY"]
    sources = [Path(src.rstrip("/")) for c in copies for src in c.value[:-1]]
    for src in sources:
        assert (ROOT / src).exists(), f"COPY source {src} missing from the build context"
    return sources


def _copied(commands) -> set[str]:
    return {src.parts[0] for src in _sources(commands)}


def _project_imports(folder: str) -> set[tuple[str, str]]:
    """(file, module) of every absolute import of a project package under `folder`, subpackages included."""
    found = set()
    for py in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(py.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            found |= {(py.relative_to(ROOT).as_posix(), n) for n in names if n.split(".")[0] in PROJECT_PACKAGES}
    return found


def test_image_copies_the_trainer_the_contract_and_of_the_launcher_only_the_checkpoint_inspection(commands):
    assert _copied(commands) == {"trainer", "elxpk_contract", "elxpk_storage", "elxpk"}
    launcher = {str(src) for src in _sources(commands) if src.parts[0] == "elxpk"}
    assert launcher == {"elxpk/__init__.py", "elxpk/errors.py", "elxpk/units.py", "elxpk/flag_rows.py",
                        "elxpk/flag_records.py", "elxpk/checkpoints"}


def test_the_launcher_files_copied_are_the_whole_import_closure_of_the_checkpoint_inspection(commands):
    """`python -m elxpk.checkpoints` (the pre-start init container) runs in the image: every `elxpk` module it
    imports, however indirectly, is among the files copied (a new module of the flag rows' once was not, and the
    init container failed with ModuleNotFoundError only in the process tests' image)."""
    copied = {str(src) for src in _sources(commands) if src.parts[0] == "elxpk"}

    def in_image(file: str) -> bool:
        return file in copied or any(file.startswith(folder + "/") for folder in copied)

    todo, seen = ["elxpk/checkpoints/__main__.py"], set()
    while todo:
        file = todo.pop()
        if file in seen:
            continue
        seen.add(file)
        assert in_image(file), f"the image lacks {file}, which `python -m elxpk.checkpoints` imports"
        for node in ast.walk(ast.parse((ROOT / file).read_text())):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in (n for n in names if n.split(".")[0] == "elxpk"):
                module = ROOT / name.replace(".", "/")
                for candidate in (module.with_suffix(".py"), module / "__init__.py"):
                    if candidate.is_file():
                        todo.append(candidate.relative_to(ROOT).as_posix())


def test_copied_sources_cover_trainer_and_contract_imports(commands):
    copied = _copied(commands)
    for folder in ("trainer", "elxpk_contract", "elxpk_storage"):
        for file, module in _project_imports(folder):
            assert module.split(".")[0] in copied, f"{folder}/{file} imports {module}, which the image lacks"

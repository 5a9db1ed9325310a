"""Every repository path the prose names exists: a moved module leaves no stale name behind.

Read: the Markdown files, the manifest templates (every rendered manifest carries their comments), and
the comments and strings (docstrings included) of the packages, tools/ and bench/. A path is a mention
that starts with a top-level folder of the repository (`elxpk/cli/main.py`, `docs/cluster.md`, `tests/`);
a dotted module name (`elxpk_storage.digest.verify`) names a module, and what follows it a name that
module defines. A mention that is a pattern (`tests/<part>/`, `tests/launcher/test_*.py`, an f-string's
`{...}`) is not a path and is passed over.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import subprocess
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("elxpk", "elxpk_contract", "elxpk_storage", "trainer")
FOLDERS = (*PACKAGES, "docs", "tests", "tools", "bench", ".ci")
CODE = (*PACKAGES, "tools", "bench")
TEMPLATES = "elxpk/create/templates"

# Not preceded by a path or URL character (`/opt/elxpk/trainer`, `gs://bkt/tests/x` are not repository paths),
# nor by a dot or a word character (`my_tests/`).
_PATH = re.compile(r"(?<![\w./:~-])((?:" + "|".join(re.escape(f) for f in FOLDERS) + r")/[\w./-]*)")
_MODULE = re.compile(r"(?<![\w./:-])((?:" + "|".join(PACKAGES) + r")(?:\.\w+)+)")
_PATTERN_NEXT = set("*<{[$")  # a mention followed by one of these is a pattern, not a path
# A file name, not a module: `bench/out/trainer.json` names `trainer.json` (a module mention has more dots).
_FILE_SUFFIXES = {"py", "md", "json", "jsonl", "yaml", "yml", "j2", "toml", "txt", "png", "csv", "sh"}
# Ratios the benchmarks print (`elxpk/xpk`: elxpk's time over xpk's), not paths.
_NOT_PATHS = {"elxpk/xpk", "elxpk/baseline"}
# A Markdown link's target: a file beside the document (`[cluster](cluster.md#events)`), not a URL.
_LINK = re.compile(r"\]\(([^()\s#]+)(?:#[^()\s]*)?\)")


def _tracked(*patterns: str) -> list[str]:
    return subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()


def _prose_of_python(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and string literal (docstrings included) of a Python source."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            found.append((token.start[0], token.string))
        elif token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            found.append((token.start[0], token.string))
    return found


def _ignored(paths: list[str]) -> set[str]:
    """The paths git ignores: what a run writes (bench/out/...), which a checkout has not got."""
    done = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT, input="\n".join(paths),
                          capture_output=True, text=True)
    return set(done.stdout.split())


def _texts() -> list[tuple[str, int, str]]:
    """(file, line, text) of the prose to check."""
    texts: list[tuple[str, int, str]] = []
    for name in _tracked("*.md", f"{TEMPLATES}/*"):
        lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
        texts += [(name, number, line) for number, line in enumerate(lines, 1)]
    for name in _tracked(*(f"{folder}/*.py" for folder in CODE)):
        if "/compiled_templates/" in name:  # generated from the templates, which are read above
            continue
        texts += [(name, number, text) for number, text in _prose_of_python((ROOT / name).read_text("utf-8"))]
    return texts


def _path_mentions(text: str) -> list[str]:
    mentions = []
    for match in _PATH.finditer(text):
        mention = match.group(1).rstrip(".-")
        following = text[match.end():match.end() + 1]
        if following in _PATTERN_NEXT or (following == "/" and mention.endswith("/")):
            continue
        mentions.append(mention)
    return mentions


def _module_file(dotted: str) -> Path | None:
    base = ROOT / Path(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _defines(path: Path, name: str) -> bool:
    """Whether the module at `path` defines `name` at its top level (or as a method or attribute of a
    class there: `Progress.age` names a class member)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == name for a in node.names):
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
    return False


def _module_problem(dotted: str) -> str | None:
    """Why `dotted` (a module, then perhaps a name it defines and a member of that) names nothing."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = _module_file(".".join(parts[:cut]))
        if path is None:
            continue
        rest = parts[cut:]
        if not rest or _defines(path, rest[0]):
            return None
        if path.name == "__init__.py":  # a package: the next part would be a submodule, and there is none
            return f"no module {'.'.join(parts[:cut + 1])}"
        return f"{'.'.join(parts[:cut])} defines no {rest[0]}"
    return f"no module {parts[0]}"


def _module_mentions(text: str) -> list[str]:
    mentions = []
    for match in _MODULE.finditer(text):
        dotted = match.group(1)
        file_name = dotted.count(".") == 1 and dotted.rsplit(".", 1)[1] in _FILE_SUFFIXES
        if text[match.end():match.end() + 1] == "/" or file_name:
            continue  # a domain (`elxpk.dev/submission-id`) or a file name (`trainer.json`)
        mentions.append(dotted)
    return mentions


def _link_targets(name: str, text: str) -> list[str]:
    """The repository paths of a Markdown document's relative links."""
    if not name.endswith(".md"):
        return []
    folder = Path(name).parent
    return [(folder / target).as_posix() for target in _LINK.findall(text) if "://" not in target
            and not target.startswith("mailto:")]


def _stale(texts: list[tuple[str, int, str]]) -> list[str]:
    missing: list[tuple[str, str]] = []
    stale = []
    for name, number, text in texts:
        for mention in [*_path_mentions(text), *_link_targets(name, text)]:
            if mention not in _NOT_PATHS and not (ROOT / mention).exists():
                missing.append((f"{name}:{number}: {mention}", mention))
        for dotted in _module_mentions(text):
            problem = _module_problem(dotted)
            if problem is not None:
                stale.append(f"{name}:{number}: {dotted} ({problem})")
    ignored = _ignored([mention for _, mention in missing])
    return [where for where, mention in missing if mention not in ignored] + stale


def test_every_repository_path_named_in_docs_templates_and_docstrings_exists():
    assert _stale(_texts()) == []


def test_the_checker_finds_a_stale_path_and_a_stale_module():
    """Made-up prose: the old homes of moved modules are caught; patterns, URLs and live names are not."""
    texts = [("x.md", 1, "see `elxpk/failure_policy.py` and trainer/gcs_auth.py, not elxpk/create/failure_policy.py"),
             ("x.md", 2, "`trainer.ckpt.digest.verify`, `elxpk_storage.digest.verify`, elxpk_storage.digest.nothing"),
             ("x.md", 3, "tests/<part>/, tests/launcher/test_*.py, gs://bkt/tests/x, /opt/elxpk/trainer/y, tests/{name}/x.yaml"),
             ("x.md", 4, "`elxpk.runs.jsonl` moved; elxpk.cli.main ran; trainer/ckpt/ holds it."),
             ("docs/x.md", 5, "[a](cluster.md#events), [b](gone.md), [c](https://x.org/y.md), elxpk.dev/id"),
             ("x.md", 6, "bench/out/trainer.json is written by a run; elxpk/xpk is a ratio")]
    assert _stale(texts) == [
        "x.md:1: elxpk/failure_policy.py", "x.md:1: trainer/gcs_auth.py", "docs/x.md:5: docs/gone.md",
        "x.md:2: trainer.ckpt.digest.verify (no module trainer.ckpt.digest)",
        "x.md:2: elxpk_storage.digest.nothing (elxpk_storage.digest defines no nothing)",
        "x.md:4: elxpk.runs.jsonl (no module elxpk.runs.jsonl)"]


def test_python_prose_is_its_comments_and_strings_only():
    source = 'import os  # tests/a.py\nX = "docs/b.md"\ndef f():\n    """elxpk/c.py"""\n    return elxpk.d\n'
    assert [text for _, text in _prose_of_python(source)] == ["# tests/a.py", '"docs/b.md"', '"""elxpk/c.py"""']

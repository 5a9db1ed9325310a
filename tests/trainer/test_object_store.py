"""Checkpoints on an object store (`gs://`): the trainer's own file operations, without a bucket.

No GCS is reachable here. Two checks stand in for it:
- the digest, leftover and quarantine code runs for real on `gs://` paths through epath's fsspec backend,
  against an in-memory fsspec filesystem registered as "gs" (tests/trainer/fake_gcs.py), in a fresh
  interpreter so that the registration cannot leak into other tests;
- a scan of trainer/ and elxpk_storage/ proves that nothing touches the checkpoint directory through os,
  pathlib, shutil or the builtin open, so no code path is left that would only work on a local disk.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

from tests.conftest import REPO_ROOT
from tests.support.runs import PERIOD, STEPS

# The modules that handle the checkpoint directory, and the only os calls they may make.
CHECKPOINT_MODULES = ("trainer/ckpt/checkpoint.py", "elxpk_storage/digest.py", "elxpk_storage/checkpoint_files.py")
ALLOWED_OS = {"os.fspath", "os.path.abspath", "os.path.realpath", "os.getcwd"}  # the last two: the working-directory check
# checkpoint_files.py alone reads and moves a local entry without following a link (lstat, O_NOFOLLOW, a rename of the
# link itself): every such call sits behind `is_object_store` or `is_link`, which an object store never is.
LINK_SAFE_OS = {"os.lstat", "os.path.islink", "os.path.lexists", "os.readlink", "os.open", "os.fstat", "os.fdopen",
                "os.close", "os.rename", "os.unlink"}


def test_checkpoint_file_operations_work_on_gs_paths(reference_run):
    proc = subprocess.run(
        [sys.executable, "-m", "tests.trainer.gs_scenario", str(reference_run.run_dir / "checkpoints")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    steps = [STEPS - 2 * PERIOD, STEPS - PERIOD, STEPS]
    newest = str(STEPS)
    assert out["root"] == "gs://bucket/run/ckpt"
    assert out["backend"] == "_FileSystemSpecBackend"
    assert out["listings_cache"] is False  # gcsfs would otherwise answer listings from a stale cache
    assert out["steps"] == steps
    assert out["uncommitted_fresh"] == []  # a new run's directory, which a bucket has not got yet
    assert out["markers"] == [True, True, True]  # orbax's commit marker, present locally too
    # Digests written locally verify on gs://, and one written on gs:// is byte for byte the local one.
    assert out["verify_uploaded"] == {str(s): None for s in steps}
    assert out["digest_identical"]
    assert out["digest_tmp_left"] == []
    assert out["uncommitted"] == [["gs://bucket/run/ckpt/20", 20],
                                  ["gs://bucket/run/ckpt/24.orbax-checkpoint-tmp", 24]]
    assert out["after_cleanup"] == sorted(str(s) for s in steps)
    assert out["corrupt_reason"].startswith("file changed: state/")
    assert out["quarantine_target"] == f"gs://bucket/run/ckpt/elxpk-quarantine/{newest}-1234"
    assert out["quarantine_files"] == sorted([*out["source_files"], "elxpk_skip_reason.txt"])
    assert not out["source_exists"]
    assert out["skip_reason"] == out["corrupt_reason"] + "\n"
    assert out["steps_after"] == sorted([*(str(s) for s in steps[:-1]), "elxpk-quarantine"])


def test_local_leftovers_and_quarantine_keep_their_local_behaviour(tmp_path):
    from elxpk_storage import checkpoint_files as ckpt_storage

    root = ckpt_storage.checkpoint_root(str(tmp_path / "ckpt"))
    for name in ("4", "8", f"12{ckpt_storage.TMP_SUFFIX}"):
        (root / name / "state").mkdir(parents=True)
        (root / name / "state" / "data").write_bytes(b"x" * 10)
    # Locally orbax commits by rename, so a step directory without gs://'s marker is committed.
    assert [(p.name, s) for p, s in ckpt_storage.uncommitted(root)] == [(f"12{ckpt_storage.TMP_SUFFIX}", 12)]
    target = ckpt_storage.quarantine(root, 8, "file changed: state/data", now_ms=5)
    assert target == tmp_path / "ckpt" / "elxpk-quarantine" / "8-5"
    assert sorted(ckpt_storage.files_under(target)) == ["elxpk_skip_reason.txt", "state/data"]
    assert not (root / "8").exists() and (root / "4").is_dir()


def _calls(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            names.add(ast.unparse(node.func))
    return names


def test_no_local_filesystem_api_touches_the_checkpoint_directory():
    problems = []
    for name in CHECKPOINT_MODULES:
        tree = ast.parse((REPO_ROOT / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                problems += [f"{name}: imports {m}" for m in modules if m in ("shutil", "pathlib", "glob")]
        for call in _calls(tree):
            allowed = ALLOWED_OS | (LINK_SAFE_OS if name == "elxpk_storage/checkpoint_files.py" else set())
            if call == "open" or (call.startswith("os.") and call not in allowed):
                problems.append(f"{name}: calls {call}")
    # Every other trainer module leaves the checkpoint directory to those modules: it reads no `checkpoint_dir`
    # field or name (the setting's name as a string, `said("checkpoint_dir")` in a message, is no use of it).
    for path in sorted((REPO_ROOT / "trainer").rglob("*.py")):
        name = path.relative_to(REPO_ROOT).as_posix()
        if name not in CHECKPOINT_MODULES and _reads_checkpoint_dir(ast.parse(path.read_text("utf-8"))):
            problems.append(f"{name}: uses checkpoint_dir directly")
    assert problems == []


def _reads_checkpoint_dir(tree: ast.AST) -> bool:
    return any((isinstance(node, ast.Attribute) and node.attr == "checkpoint_dir")
               or (isinstance(node, ast.Name) and node.id == "checkpoint_dir") for node in ast.walk(tree))


def test_the_scan_would_catch_a_read_of_the_directory_but_not_its_name_in_a_message():
    assert _reads_checkpoint_dir(ast.parse("Path(cfg.checkpoint_dir) / 'x'"))
    assert _reads_checkpoint_dir(ast.parse("def f(checkpoint_dir): return checkpoint_dir"))
    assert not _reads_checkpoint_dir(ast.parse("root(cfg.checkpoint_path, said('checkpoint_dir'))"))


def test_the_scan_would_catch_a_local_call():
    tree = ast.parse("import shutil\nshutil.move(a, b)\nos.replace(a, b)\nopen(p)\nos.fspath(p)\n")
    assert _calls(tree) - ALLOWED_OS == {"shutil.move", "os.replace", "open"}

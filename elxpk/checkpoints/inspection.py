"""What a checkpoint directory holds, step by step: committed, torn or unreadable; the step a restore takes;
the save cadence achieved. `elxpk checkpoint inspect DIR [--quarantine]`.

Two layouts, both orbax CheckpointManager directories of `<step>/` entries:
- the bundled trainer's (trainer/ckpt/checkpoint.py): each step also holds `elxpk_digest.json`, the record of
  its files and sizes. A step is whole when the trainer's own check passes (`elxpk_storage.digest.verify`); the
  trainer restores the newest whole step (the arrays' fingerprints are checked then, on the devices).
- MaxText's (`base_output_directory/run_name/checkpoints/<step>`), orbax alone: a step is whole when orbax
  committed it and its metadata is there and parses (`_CHECKPOINT_METADATA`, each item's `_METADATA`, the
  OCDBT manifests, no empty file). Without a digest a truncated array file cannot be seen from the listing.
  MaxText restores orbax's newest listed step whatever it holds: a torn one there is what `--quarantine`
  moves aside.

A save that never committed is what the trainer calls uncommitted (`elxpk_storage.checkpoint_files.uncommitted`:
orbax's `<step>.orbax-checkpoint-tmp` directory; on `gs://` a `<step>/` without orbax's commit marker).
Every file operation goes through etils.epath, as orbax's and the trainer's do, so `gs://` works wherever
gcsfs is installed. Nothing here imports jax: reading a listing and a few small JSON files needs none.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from elxpk.errors import ElxpkError, UsageError
from elxpk_contract.progress_record import PROGRESS_FILE, read_progress
from elxpk_contract.record_fields import RecordError
from elxpk_contract.step_names import step_number
from elxpk_contract.transient import describe, transient_cause
from elxpk_storage.run_records import RUN_DIR_INSIDE

COMMITTED, TORN, UNREADABLE = "committed", "torn", "unreadable"
TRAINER_LAYOUT, ORBAX_LAYOUT, EMPTY = "elxpk trainer", "orbax (MaxText)", "empty"
# orbax's TMP_DIR_STEP_PATTERN (orbax/checkpoint/_src/path/step.py), with its optional `-<timestamp>` tail
TMP_STEP = re.compile(r"^(?:.*_)?(\d+)\.orbax-checkpoint-tmp(?:-\d+)?$", re.ASCII)
STEP_METADATA = "_CHECKPOINT_METADATA"  # orbax writes it into every step: item handlers, commit time
ITEM_METADATA = "_METADATA"  # a PyTree item's tree metadata
# What orbax or the trainer writes into a step: only an entry holding one of these is ever moved.
MARKS = frozenset({STEP_METADATA, ITEM_METADATA, "_sharding", "manifest.ocdbt", "commit_success.txt",
                   "elxpk_digest.json"})
MAX_JSON_BYTES = 4 << 20  # a metadata file larger than this is no orbax metadata: never read it whole
SUBDIR = "checkpoints"  # the trainer's RUN_DIR/checkpoints and MaxText's run_name/checkpoints


@dataclass
class Step:
    step: int
    name: str  # the entry's name: "8", or "8.orbax-checkpoint-tmp"
    state: str  # committed, torn or unreadable
    reason: str = ""
    committed_at: float | None = None  # unix seconds, from orbax's _CHECKPOINT_METADATA
    has_metadata: bool = False  # carries orbax's or the trainer's files
    movable: bool = False  # what --quarantine may move: carries those files, is empty, or is a symbolic link


@dataclass
class Inspection:
    directory: str
    layout: str
    steps: list[Step]
    restore_step: int | None  # the step a restart restores, as the layout's restore picks it
    period: int | None
    period_source: str  # "--checkpoint-period", "inferred" (the smallest gap between saves) or ""
    trainer_step: int | None  # the trainer's steps_done (its progress record), when there is one
    gaps: list[tuple[int, int]] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    moved: list[dict] = field(default_factory=list)  # what --quarantine moved: step, name, reason, to
    skipped: list[dict] = field(default_factory=list)  # what --quarantine found gone: step, name, note

    def committed(self) -> list[Step]:
        return [s for s in self.steps if s.state == COMMITTED]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["gaps"] = [list(g) for g in self.gaps]
        data["healthy"] = not self.findings
        return data


def epath_module() -> Any:
    try:
        from etils import epath
    except ImportError:
        raise ElxpkError("checkpoint inspect needs etils (and gcsfs for gs://), as the trainer does: "
                         "pip install 'elxpk[trainer]'") from None
    return epath


def step_of(name: str) -> tuple[int, bool] | None:
    """(step, whether it is orbax's temporary directory) of an entry name, or None when it is no step's.
    A step number is ASCII digits only (elxpk_contract.step_names), at most MAX_INDEX."""
    tmp = TMP_STEP.match(name)
    step = step_number(tmp.group(1) if tmp else name)
    return None if step is None else (step, tmp is not None)


def _is_step_entry(name: str) -> bool:
    return step_of(name) is not None


def resolve(arg: str) -> Any:
    """The directory holding the `<step>/` entries: DIR itself, else DIR/checkpoints. UsageError (exit 2)
    when DIR does not exist, is a file, or holds other things and no checkpoint."""
    from elxpk_storage import checkpoint_files as ckpt_storage

    if not arg.strip():
        raise UsageError("DIR: empty; give the checkpoint directory, e.g. gs://BUCKET/RUN/checkpoints")
    epath_module()
    root = ckpt_storage.checkpoint_root(arg, "DIR")
    try:
        if not root.exists():
            raise UsageError(f"DIR {arg}: does not exist; give the trainer's --checkpoint-dir or MaxText's "
                             "base_output_directory/run_name/checkpoints")
        if not root.is_dir():
            raise UsageError(f"DIR {arg}: is a file; give the directory that holds the <step>/ directories")
        names = [p.name for p in ckpt_storage.children(root)]
        if any(_is_step_entry(n) for n in names):
            return root
        if SUBDIR in names and (root / SUBDIR).is_dir():
            return root / SUBDIR
    except OSError as exc:
        raise ElxpkError(f"DIR {arg}: cannot list it: {exc}") from None
    if set(names) - {PROGRESS_FILE, RUN_DIR_INSIDE}:  # a run's own records before its first save
        raise UsageError(f"DIR {arg}: holds no checkpoint step (no <step>/ directory and no {SUBDIR}/); give the "
                         "directory that holds them, e.g. base_output_directory/run_name/checkpoints")
    return root


def _read_json(path: Any) -> tuple[Any, str]:
    """(the decoded file, '') or (None, why not); never reads more than MAX_JSON_BYTES, nor through a link."""
    from elxpk_storage.checkpoint_files import read_bounded

    try:
        data = read_bounded(path, MAX_JSON_BYTES)
    except FileNotFoundError:
        return None, f"no {path.name}"
    except OSError as exc:
        _raise_transient(exc)
        return None, f"{path.name} unreadable: {exc}"
    if len(data) > MAX_JSON_BYTES:
        return None, f"{path.name} is over {MAX_JSON_BYTES} bytes: not orbax metadata"
    try:
        return json.loads(data.decode("utf-8")), ""
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"{path.name} is not JSON ({str(exc)[:80]})"


def _raise_transient(exc: BaseException) -> None:
    """Re-raise `exc` when it is a transient failure (elxpk_contract.transient: storage unavailable, access
    denied, out of memory): it says nothing about the step, which must not be called unreadable or torn."""

    if transient_cause(exc) is not None:
        raise exc


@contextmanager
def transient_is_retryable(directory: str) -> Iterator[None]:
    """One line, exit 1, for a failure of the storage itself while inspecting or moving (the listing, a read,
    a move): never a finding about a step, never a move because of it. `inspect --quarantine` and the
    pre-start init container run again once the storage answers (the init container's exit 1 fails the
    pod, and the JobSet's restart runs it again)."""

    try:
        yield
    except ElxpkError:
        raise
    except Exception as exc:
        if transient_cause(exc) is None and not isinstance(exc, OSError):
            raise
        raise ElxpkError(f"DIR {directory}: {describe(exc)}; no step was set aside for it; run again once the "
                         "storage answers") from None


def _has_marks(entry: Any) -> bool:
    """Whether `entry` or one of its subdirectories holds a file orbax or the trainer writes (no link is
    looked through: the caller has refused the step already when it holds one)."""
    from elxpk_storage.checkpoint_files import children, is_link, present

    folders = [entry]
    try:
        for child in children(entry):
            if child.name in MARKS:
                return True
            if not is_link(child) and child.is_dir():
                folders.append(child)
        return any(present(folder / mark) for folder in folders[1:] for mark in MARKS)
    except OSError as exc:
        _raise_transient(exc)
        return False


def _trainer_problem(step_dir: Any, step: int) -> tuple[str, str] | None:
    """(state, reason) of a committed step by the trainer's own check; None when it would restore it."""
    from elxpk_storage import digest

    reason = digest.verify(step_dir, step)
    if reason is None:
        return None
    unreadable = (step_dir / digest.DIGEST_FILE).exists() and digest.read_digest(step_dir) is None
    return (UNREADABLE if unreadable else TORN), reason


def _orbax_problem(step_dir: Any, meta: Any, why: str) -> tuple[str, str] | None:
    """(state, reason) of a committed orbax step from its metadata and listing; None when whole."""
    if why:
        return (TORN, f"{why}: orbax writes it into every step") if why.startswith("no ") else (UNREADABLE, why)
    if not isinstance(meta, dict):
        return UNREADABLE, f"{STEP_METADATA} is a JSON {type(meta).__name__}, not an object"
    handlers = meta.get("item_handlers")
    items: dict = handlers if isinstance(handlers, dict) else {}
    for item, handler in sorted(items.items()):
        folder = step_dir / item
        if not folder.is_dir():
            return TORN, f"item {item!r} missing (listed in {STEP_METADATA})"
        if "PyTree" in str(handler) or "Standard" in str(handler):
            tree, problem = _read_json(folder / ITEM_METADATA)
            if not problem and not isinstance(tree, dict):
                problem = f"{ITEM_METADATA} is a JSON {type(tree).__name__}, not an object"
            if problem:
                return (TORN if problem.startswith("no ") else UNREADABLE), f"item {item!r}: {problem}"
    from elxpk_storage.checkpoint_files import files_under

    files = files_under(step_dir)
    for rel, path in sorted(files.items()):
        if path.stat().length == 0:
            return TORN, f"file empty: {rel}"
        parts = rel.split("/")
        if len(parts) >= 3 and parts[-3].startswith("ocdbt.process_") and parts[-2] == "d":
            # OCDBT: a process's data files are reachable only through its manifest, and its manifest only
            # through the item's (orbax merges them when the save finalizes)
            for manifest in ("/".join([*parts[:-2], "manifest.ocdbt"]), "/".join([*parts[:-3], "manifest.ocdbt"])):
                if manifest not in files:
                    return TORN, f"file missing: {manifest}"
    return None


def _inspect_step(root: Any, name: str, step: int, uncommitted: bool, layout: str) -> Step | None:
    """The step's state; None when its entry is gone (moved by a concurrent --quarantine or the trainer)."""
    from elxpk_storage import checkpoint_files as ckpt_storage

    entry = root / name
    found = Step(step, name, COMMITTED)
    try:
        ckpt_storage.files_under(entry)  # no walk follows a link: a step that is or holds one is torn
        if ckpt_storage.is_empty(entry):
            found.state, found.movable = TORN, True
            never = uncommitted or ckpt_storage.is_object_store(entry)  # on gs://, no commit marker either
            found.reason = ("never committed: " if never else "") + "empty: a save killed before its first write"
            return found
    except ckpt_storage.LinkInStep as exc:
        # a link is moved, not its target; a FIFO or a socket is moved unopened
        why = "moving it moves the link, not its target" if "symbolic link" in str(exc) else "moving it opens nothing"
        found.state, found.movable, found.reason = TORN, True, f"{exc} ({why})"
        return found
    except FileNotFoundError:
        return None
    except OSError as exc:
        _raise_transient(exc)
        found.state, found.reason = UNREADABLE, f"cannot list or read it: {exc}"
        return found
    try:
        found.has_metadata = found.movable = _has_marks(entry)
        meta, why = _read_json(entry / STEP_METADATA)
        if isinstance(meta, dict) and isinstance(meta.get("commit_timestamp_nsecs"), int):
            found.committed_at = meta["commit_timestamp_nsecs"] / 1e9
        if uncommitted:
            found.state, found.committed_at = TORN, None
            found.reason = "never committed: the save was interrupted before orbax's commit"
            return found
        problem = _trainer_problem(entry, step) if layout == TRAINER_LAYOUT else _orbax_problem(entry, meta, why)
    except OSError as exc:
        _raise_transient(exc)
        problem = UNREADABLE, f"cannot list or read it: {exc}"
    if problem is not None:
        found.state, found.reason = problem
    return found


def _layout(root: Any, names: list[str]) -> str:
    from elxpk_storage.checkpoint_files import is_link, present
    from elxpk_storage.digest import DIGEST_FILE

    numbered = [n for n in names if (parsed := step_of(n)) is not None and not parsed[1] and not is_link(root / n)]
    if PROGRESS_FILE in names or any(present(root / n / DIGEST_FILE) for n in numbered):
        return TRAINER_LAYOUT
    return ORBAX_LAYOUT if any(_is_step_entry(n) for n in names) else EMPTY


def _trainer_step(root: Any) -> int | None:
    data, _ = _read_json(root / PROGRESS_FILE)
    try:
        return None if data is None else read_progress(json.dumps(data)).steps_done
    except RecordError:
        return None


def inspect_directory(root: Any, period: int | None) -> Inspection:
    from elxpk_storage import checkpoint_files as ckpt_storage

    names = sorted(p.name for p in ckpt_storage.children(root))
    layout = _layout(root, names)
    uncommitted = {p.name for p, _ in ckpt_storage.uncommitted(root)}  # the trainer's own definition
    steps = []
    for name in names:
        parsed = step_of(name)
        if parsed is None or not (parsed[1] or ckpt_storage.is_link(root / name) or (root / name).is_dir()):
            continue
        step, tmp = parsed
        found = _inspect_step(root, name, step, tmp or name in uncommitted, layout)
        if found is not None:
            steps.append(found)
    steps.sort(key=lambda s: (s.step, s.name))
    result = Inspection(str(root), layout, steps, None, period, "--checkpoint-period" if period else "",
                        _trainer_step(root) if layout == TRAINER_LAYOUT else None)
    _restore(result)
    _cadence(result)
    return result


def _restore(result: Inspection) -> None:
    """The trainer restores the newest step its check passes; orbax (MaxText) the newest it lists."""
    listed = [s for s in result.steps if s.name == str(s.step) and not s.reason.startswith("never committed")]
    for s in result.steps:
        if s.state != COMMITTED:
            kept = "" if s.movable or s.state != TORN else \
                " (--quarantine leaves it: it holds no file orbax or the trainer writes)"
            name = "" if s.name == str(s.step) else f" ({s.name})"
            result.findings.append(f"step {s.step}{name} is {s.state}: {s.reason}{kept}")
    if result.layout == TRAINER_LAYOUT:
        whole = result.committed()
        result.restore_step = whole[-1].step if whole else None
    elif listed:
        newest = listed[-1]
        result.restore_step = newest.step
        if newest.state != COMMITTED:
            fix = "--quarantine moves it aside" if newest.state == TORN else "move it aside after a look"
            result.findings.append(f"a restart restores step {newest.step}, which is {newest.state}: {fix}")


def _cadence(result: Inspection) -> None:
    """Gaps of two periods or more between committed saves, and after the last one (the trainer's step)."""
    numbers = sorted({s.step for s in result.steps})
    if result.period is None and len(numbers) >= 2:
        result.period = min(b - a for a, b in zip(numbers, numbers[1:], strict=False))
        result.period_source = "inferred"
    period = result.period
    if period is None:
        return
    saved = [s.step for s in result.committed()]
    for a, b in zip(saved, saved[1:], strict=False):
        if b - a >= 2 * period:
            result.gaps.append((a, b))
            result.findings.append(f"no committed save between steps {a} and {b}: {(b - a) / period:g} periods "
                                   f"of {period} ({result.period_source})")
    last = saved[-1] if saved else 0
    if result.trainer_step is not None and result.trainer_step - last >= 2 * period:
        result.gaps.append((last, result.trainer_step))
        result.findings.append(f"saves stopped: the trainer is at step {result.trainer_step}, the last committed "
                               f"save is {'step ' + str(last) if saved else 'none'} (period {period})")


def refuse_cwd(root: Any) -> None:
    """--quarantine never moves anything out from under the shell: not the cwd, nor a parent of it."""
    from elxpk_storage.checkpoint_files import cwd_or_parent

    where = cwd_or_parent(root)
    if where:
        raise UsageError(f"--quarantine: {os.path.realpath(os.fspath(root))} is {where}; "
                         "run it from another directory")


def quarantine(result: Inspection, root: Any, now_ms: int) -> tuple[list[dict], list[dict]]:
    """Move every movable torn step aside (orbax's or the trainer's files, an empty folder, a symbolic link),
    as the trainer does (its own `ckpt_storage.quarantine`, reason file included); inspect again afterwards.
    Unreadable steps stay. (moved, skipped): a step gone before its move (another --quarantine, or the
    trainer, moved it first) is skipped with a note, never an error. UsageError before anything moves when
    DIR/elxpk-quarantine is a file or a link."""
    from elxpk_storage import checkpoint_files as ckpt_storage

    torn = [s for s in result.steps if s.state == TORN and s.movable]
    if torn:
        ckpt_storage.quarantine_dir(root)
    moved, skipped = [], []
    for s in torn:
        target = ckpt_storage.quarantine(root, s.step, s.reason, now_ms=now_ms, name=s.name)
        if target is None:
            skipped.append({"step": s.step, "name": s.name, "note": "gone before it could be moved (another "
                            "--quarantine or the trainer moved it): nothing to do"})
        else:
            moved.append({"step": s.step, "name": s.name, "reason": s.reason, "to": str(target)})
    return moved, skipped


def inspect_and_quarantine(root: Any, period: int | None, now_ms: int) -> Inspection:
    """`--quarantine` (and the pre-start): inspect, move the torn steps aside, inspect again when anything
    changed, and record what was moved and skipped."""
    result = inspect_directory(root, period)
    moved, skipped = quarantine(result, root, now_ms)
    if moved or skipped:
        result = inspect_directory(root, period)
    result.moved, result.skipped = moved, skipped
    return result

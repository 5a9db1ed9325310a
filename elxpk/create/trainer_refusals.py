"""What the bundled trainer in a rendered JobSet will refuse at its start, found before anything is submitted.

A JobSet whose container runs `python -m trainer` hands the trainer its settings as ELXPK_* env and the
extra arguments of its command line; the trainer then checks them together (elxpk_contract.settings
`TrainerConfig.problems`) and against the slices it finds (`on_hardware`: the slice count, and a global batch
that divides over every device of every slice count the run may train on). It exits 2 there, after every
chip was scheduled. This reads the same inputs from the manifest, the slices from the TPU node selector of
the replicatedJob that holds them (elxpk/catalog.py: jax's devices per slice), and runs the trainer's own
checks on them: `workload create` refuses what fails (exit 2), `workload validate` reports it per JobSet.
Standard library and the contract only: no jax.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from elxpk import catalog
from elxpk.create.budget_checks import containers, trainer_env_values
from elxpk_contract.errors import UsageError
from elxpk_contract.setting_rules import env_name, flag_name
from elxpk_contract.spelling import Spelling, spoken_as

_SHELL_OPERATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", ";;", "|&", "\n"})
_TPU_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
_TPU_TOPOLOGY = "cloud.google.com/gke-tpu-topology"


class TrainerBox(NamedTuple):
    """The container that runs the bundled trainer, where it is, and the arguments after `-m trainer`."""

    path: str
    container: dict[str, Any]
    argv: tuple[str, ...]


def trainer_argv(words: Iterable[Any]) -> tuple[str, ...] | None:
    """The trainer's own arguments when the command line `words` (a container's command then args) runs
    `python -m trainer`, directly or as a shell string (`bash -c "... python3 -m trainer --steps 5"`); None
    when it does not."""
    words = [w for w in words if isinstance(w, str)]
    found = _after_module(words)
    if found is not None:
        return found
    for word in words:
        if "trainer" not in word:
            continue
        import shlex  # lazy: only a command that names the trainer is split (the --dry-run start-up budget)

        lexer = shlex.shlex(word, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:  # an unclosed quote: the shell refuses it too, before any trainer runs
            continue
        found = _after_module(tokens)
        if found is not None:
            return found
    return None


def _after_module(tokens: list[str]) -> tuple[str, ...] | None:
    for i in range(1, len(tokens) - 1):
        if tokens[i] == "-m" and tokens[i + 1] == "trainer" and tokens[i - 1].rsplit("/", 1)[-1].startswith("python"):
            rest = tokens[i + 2:]
            end = next((k for k, t in enumerate(rest) if t in _SHELL_OPERATORS), len(rest))
            return tuple(rest[:end])
    return None


def _at(obj: Any, *keys: str) -> Any:
    """obj[k1][k2]...: None where a level is missing or not a mapping (validate reads any YAML)."""
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _replicated_jobs(jobset: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return [(i, r) for i, r in enumerate(_list(_at(jobset, "spec", "replicatedJobs"))) if isinstance(r, dict)]


def trainer_box(jobset: dict[str, Any]) -> TrainerBox | None:
    """The first container of the JobSet that runs the bundled trainer."""
    for i, rjob in _replicated_jobs(jobset):
        for j, box in containers(rjob):
            argv = trainer_argv([*_list(box.get("command")), *_list(box.get("args"))])
            if argv is not None:
                return TrainerBox(f"spec.replicatedJobs[{i}].template.spec.template.spec.containers[{j}]", box, argv)
    return None


def tpu_slices(jobset: dict[str, Any]) -> tuple[catalog.TpuType, int] | None:
    """The TPU slice type and slice count: the replicatedJob whose pods select a TPU node pool of the
    catalog, one Job (one slice) per replica. None when there is none, or several that disagree."""
    found = set()
    for _, rjob in _replicated_jobs(jobset):
        selector = _at(rjob, "template", "spec", "template", "spec", "nodeSelector")
        if not isinstance(selector, dict) or _TPU_ACCELERATOR not in selector:
            continue
        row = catalog.from_node_labels(str(selector.get(_TPU_ACCELERATOR)), str(selector.get(_TPU_TOPOLOGY)), None)
        replicas = rjob.get("replicas", 1)
        if not isinstance(row, catalog.TpuType) or isinstance(replicas, bool) or not isinstance(replicas, int):
            return None
        found.add((row, replicas))
    return found.pop() if len(found) == 1 else None


def trainer_problems(jobset: dict[str, Any], *, by_env: bool = False) -> list[tuple[str, str]]:
    """(path of the trainer's container, message) for each thing its trainer would refuse at the start;
    empty when no container runs the bundled trainer. An env value the trainer refuses on its own is the
    budget checks' line (elxpk/create/budget_checks.py), so it is not repeated here. `by_env`: each message
    names a setting by its env var (`workload validate` reads a manifest; `workload create` names its flags)."""
    box = trainer_box(jobset) if by_env else None
    if box is None:
        return _problems(jobset)
    flags = {word.split("=", 1)[0] for word in box.argv}  # a setting the command line gives is named as a flag

    def named(name: str) -> str:
        return flag_name(name) if flag_name(name) in flags else env_name(name)

    with spoken_as(Spelling(namer=named)):
        return _problems(jobset)


def _problems(jobset: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        return _found(jobset)
    except (TypeError, ValueError, AttributeError):  # a malformed manifest: its schema violations say why
        return []


def _found(jobset: dict[str, Any]) -> list[tuple[str, str]]:
    box = trainer_box(jobset)
    if box is None:
        return []
    from elxpk_contract.command_line import (
        parse_command_line,  # lazy: argparse and the config, for a trainer only
    )

    if trainer_env_values(box.container, box.path)[1]:
        return []
    env = {str(e.get("name")): str(e.get("value", "")) for e in box.container.get("env") or []
           if isinstance(e, dict) and "valueFrom" not in e and str(e.get("name", "")).startswith("ELXPK_")}
    try:
        config, actions = parse_command_line(box.argv, env)
    except UsageError as exc:
        return [(box.path, m) for m in exc.messages]
    slices = tpu_slices(jobset)
    if actions or slices is None or not config.topology_from_hardware:
        return []  # an action exits before training; a simulated or GPU layout is checked by the config itself
    tpu, count = slices
    try:
        config.on_hardware(count, tpu.devices_per_slice, tpu.name)
    except UsageError as exc:
        return [(box.path, m) for m in exc.messages]
    return []


def jobset_trainer_problems(obj: Any) -> list[str]:
    """The messages of `trainer_problems` for one object of a manifest (none unless it is a JobSet)."""
    if not isinstance(obj, dict) or obj.get("kind") != "JobSet":
        return []
    return [message for _, message in trainer_problems(obj)]

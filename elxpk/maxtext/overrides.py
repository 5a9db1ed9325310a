"""The launcher's trainer settings as MaxText config overrides (`key=value` after the config file).

`maxtext_overrides(settings, pathways=..., elastic=..., user_command=...)` is pure: it returns the
overrides, the edited command, and every problem as one line (errors: exit 2, nothing submitted;
warnings: stderr). The mapping, the refusals and the checkpoint location are described in
docs/maxtext.md. Standard library only (render path).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from elxpk.maxtext import command as cmd
from elxpk.maxtext import data_rules
from elxpk.maxtext.keys import (
    ENV_PREFIX,
    KEYS,
    MODEL_CONFIG_KEYS,
    parse_value,
    render_value,
    yaml_text,
)
from elxpk_contract.compile_cache import cache_dir
from elxpk_contract.setting_rules import check_setting, flag_name
from elxpk_contract.spelling import said, typed

# Launcher settings (elxpk_contract.settings names) that become the MaxText key of the same name.
DIRECT = ("steps", "checkpoint_period", "elastic_timeout_seconds", "elastic_max_retries", "elastic_min_slice_count",
          "gradient_accumulation_steps")
# Settings the caller passes as the `pathways`/`elastic` arguments instead (rendered from other flags).
DERIVED = ("num_slices", "slice_backend", "elastic_enabled")
ENTRY_HINT = "python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml key=value ..."


@dataclass(frozen=True)
class Overrides:
    values: tuple[tuple[str, str], ...]  # (MaxText key, value) elxpk appends, in order
    command: str  # the user's command with the overrides inserted (unchanged when there are errors)
    errors: tuple[str, ...]  # one line each, naming the elxpk flag and the fix
    warnings: tuple[str, ...]
    checkpoints: str | None = None  # where MaxText writes checkpoints, when --checkpoint-dir is given

    @property
    def tokens(self) -> tuple[str, ...]:
        return tuple(f"{k}={v}" for k, v in self.values)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.values)


@dataclass(frozen=True)
class _Want:
    key: str
    value: object
    source: str  # the elxpk flag (and value) that asks for it, for messages
    fix: str  # how to resolve a conflict with --command
    yields: bool = False  # a default elxpk derives: a value --command or --env gives instead wins, unremarked


def checkpoint_location(checkpoint_dir: str) -> tuple[str, str]:
    """(base_output_directory, run_name) for `--checkpoint-dir D`: MaxText then writes checkpoints in
    D/checkpoints/ (types.py: checkpoint_dir = base_output_directory/run_name/checkpoints/).

    Raises ValueError with the reason and an example when D cannot be split that way.
    """
    d = checkpoint_dir.strip().rstrip("/")
    yaml_text(d)  # raises for ${ and line breaks: no quoting makes MaxText read them back
    scheme, sep, path = d.partition("://")
    if sep and "/" not in path.strip("/"):
        raise ValueError(f"give a directory inside the bucket, e.g. {d}/my-run (it becomes run_name)")
    base, run = posixpath.split(d)
    if not run or run in (".", "..") or not base or (sep and base == f"{scheme}:/"):
        raise ValueError("give a parent directory too, e.g. gs://BUCKET/my-run "
                         "(the last part becomes run_name)")
    return base, run


def maxtext_overrides(settings: Mapping[str, object], *, pathways: bool, elastic: bool,
                      user_command: str, container_env: Mapping[str, str] | None = None) -> Overrides:
    """The overrides for `settings` (elxpk setting name -> value as typed or converted; None or absent:
    not given, so MaxText keeps its own value) on a MaxText `user_command`.

    `pathways`: the workload runs on Pathways (enable_single_controller=true; false with --no-pathways, where
    the command runs on every VM as multi-controller JAX). `elastic`: elastic training
    is on (--elastic-slices >= 1). `container_env`: the container's --env (MaxText reads its `M_<KEY>`
    variables too). Raises ValueError for a setting name elxpk has no MaxText mapping for.
    """
    errors: list[str] = []
    warnings: list[str] = []
    wants, checkpoints = _wanted(settings, pathways=pathways, elastic=elastic, errors=errors)
    elastic_flag = said("elastic_slices")  # as the command spells it (gcluster's --pathways-elastic-slices)
    if elastic and not pathways and typed("no_pathways"):  # else the dialect asked for --pathways already
        errors.append(f"--no-pathways with {elastic_flag}: MaxText trains elastically only on Pathways "
                      "(types.py: elastic training requires enable_single_controller=true); "
                      f"drop --no-pathways or use {elastic_flag} 0")
    try:
        found = cmd.find_invocations(user_command)
    except cmd.CommandError as exc:
        errors.append(f"--command {exc}; fix the quoting")
        found = []
    else:
        if not found:
            where = ("inside a quoted string (e.g. bash -c '...'), where elxpk cannot add overrides"
                     if cmd.mentions_maxtext(user_command) else "no MaxText trainer")
            errors.append(f"--command runs {where}; run it directly: {ENTRY_HINT}")
        elif len(found) > 1:
            errors.append(f"--command runs MaxText {len(found)} times; elxpk adds its overrides to one run "
                          "only, so run one MaxText trainer per workload")
    if len(found) != 1:
        return Overrides(tuple((w.key, render_value(w.value)) for w in wants), user_command, tuple(errors),
                         tuple(warnings), checkpoints)
    inv = found[0]
    env = dict(container_env or {})
    emit = [w for w in wants if _agrees(w, inv, env, errors)]
    _check_command_values(inv, {w.key for w in wants}, env, errors)
    errors.extend(data_rules.elastic_iterator_errors(inv))
    if elastic:
        warnings.extend(data_rules.data_order_warnings(inv))
    values = tuple((w.key, render_value(w.value)) for w in emit)
    tokens = [f"{k}={v}" for k, v in values]
    edited = user_command if errors else cmd.insert(user_command, inv.insert_at, tokens)
    return Overrides(values, edited, tuple(errors), tuple(warnings), checkpoints)


def _wanted(settings: Mapping[str, object], *, pathways: bool, elastic: bool,
            errors: list[str]) -> tuple[list[_Want], str | None]:
    unknown = sorted(set(settings) - set(DIRECT) - set(DERIVED) - {"checkpoint_dir", "compilation_cache_dir"})
    if unknown:
        raise ValueError(f"no MaxText mapping for setting(s) {', '.join(unknown)}")
    elastic_flag = said("elastic_slices")
    state = f"on ({elastic_flag} >= 1)" if elastic else f"off ({elastic_flag} 0)"
    wants = [_Want("elastic_enabled", elastic, f"elastic training {state}",
                   f"set elasticity with {elastic_flag}, not in --command")]
    if pathways:
        wants.append(_Want("enable_single_controller", True, "Pathways",
                           "drop it from --command (or use --no-pathways)"))
    else:
        wants.append(_Want("enable_single_controller", False, "--no-pathways",
                           # gcluster's spelling implies --no-pathways: no advice to drop what was not typed
                           "drop it from --command" + (" (or drop --no-pathways)" if typed("no_pathways") else "")))
    given: dict[str, object] = {}
    for name in ("checkpoint_dir", *DIRECT):
        raw = settings.get(name)
        if raw is None:
            continue
        value, problem = (str(raw), None) if name == "checkpoint_dir" else check_setting(name, raw)
        if problem:
            errors.append(problem)
            continue
        reason = KEYS[name].problem(value) if name in KEYS else None
        if reason:
            errors.append(f"{flag_name(name)} {value}: {reason}")
            continue
        given[name] = value
    checkpoints = None
    asked = [name for name in ("checkpoint_dir", "checkpoint_period") if name in given]
    if asked:  # a checkpoint flag means checkpoints are wanted
        first = asked[0]
        wants.append(_Want("enable_checkpointing", True, f"{flag_name(first)} {given[first]}",
                           "drop enable_checkpointing from --command, or drop the checkpoint flags"))
    if "checkpoint_dir" in given:
        d = given["checkpoint_dir"]
        try:
            base, run = checkpoint_location(str(d))
        except ValueError as exc:
            errors.append(f"--checkpoint-dir {d}: {exc}")
        else:
            checkpoints = f"{base}/{run}/checkpoints/"
            why = "(MaxText writes checkpoints to base_output_directory/run_name/checkpoints)"
            wants.append(_Want("base_output_directory", base, f"--checkpoint-dir {d}",
                               f"{why}; drop base_output_directory from --command, or use --checkpoint-dir "
                               f"<theirs>/{run}"))
            wants.append(_Want("run_name", run, f"--checkpoint-dir {d}",
                               f"{why}; drop run_name from --command, or use --checkpoint-dir "
                               f"{base}/<theirs>"))
    for name in DIRECT:
        if name in given:
            wants.append(_Want(name, given[name], f"{flag_name(name)} {given[name]}",
                               f"drop {name} from --command, or drop {flag_name(name)}"))
    cache = _cache_want(settings.get("compilation_cache_dir"), checkpoints, errors)
    return wants + ([cache] if cache else []), checkpoints


def _cache_want(given: object, checkpoints: str | None, errors: list[str]) -> _Want | None:
    """jax_cache_dir: --compilation-cache-dir as given (`off`: empty, MaxText's none), else beside MaxText's
    checkpoints (elxpk_contract.compile_cache) when --checkpoint-dir places them: MaxText's own default,
    ~/jax_cache, lives in the pod and is gone at the restart it is for. Nothing without either."""
    flag = flag_name("compilation_cache_dir")
    if given is None:
        if checkpoints is None:
            return None
        return _Want("jax_cache_dir", cache_dir(None, checkpoints), f"--checkpoint-dir (the default {flag})", "",
                     yields=True)
    value = cache_dir(str(given), checkpoints or "") or ""
    try:
        yaml_text(value)
    except ValueError as exc:
        errors.append(f"{flag} {given}: {exc}")
        return None
    return _Want("jax_cache_dir", value, f"{flag} {given}", f"drop jax_cache_dir from --command, or drop {flag}")


def _same(key: str, a: object, b: object) -> bool:
    if key == "base_output_directory":
        return str(a).rstrip("/") == str(b).rstrip("/")
    return a == b


def _agrees(w: _Want, inv: cmd.Invocation, container_env: Mapping[str, str], errors: list[str]) -> bool:
    """Whether elxpk must still append `w` (False when --command already sets the same value). A different
    value in --command, in the model config, or any M_ env var of the key (--env or in front of the command)
    is an error."""
    mine = f"{w.key}={render_value(w.value)}"
    env_name = ENV_PREFIX + w.key.upper()
    if w.yields and (env_name in container_env or env_name in inv.env or w.key in inv.overrides):
        return False
    if env_name in container_env:
        errors.append(f"{w.source}: --env {env_name}={container_env[env_name]} sets {w.key} for MaxText, which "
                      f"refuses a key set both as {env_name} and on its command line, where elxpk writes "
                      f"{mine}; drop --env {env_name}")
        return False
    if env_name in inv.env:
        errors.append(f"{w.source}: --command sets {inv.env[env_name].raw}, and MaxText refuses a key set "
                      f"both as {env_name} and on its command line, where elxpk writes {mine}; "
                      f"drop {env_name}")
        return False
    model = inv.value("model_name")
    preset = MODEL_CONFIG_KEYS.get(model or "", {})
    overridden = _flag_true(inv, "override_model_config")
    if w.key in preset and not _same(w.key, preset[w.key], w.value) and not overridden:
        errors.append(f"{w.source}: model_name={model} sets {w.key}={preset[w.key]} in its model config, "
                      f"and MaxText refuses {mine} on top of it; add override_model_config=true to --command")
    word = inv.overrides.get(w.key)
    if word is None:
        return True
    if word.dynamic:
        fix = w.fix.split(", or use")[0]
        errors.append(f"{w.source}: --command sets {word.raw}, which the shell expands, so elxpk cannot "
                      f"check it against {mine}{_sep(fix)}{fix}")
        return False
    try:
        theirs = parse_value(w.key, word.value.split("=", 1)[1])
    except ValueError:
        theirs = None
    if theirs is not None and _same(w.key, theirs, w.value):
        return False
    if theirs is None:
        fix = w.fix.split(", or use")[0]
    else:
        fix = w.fix.replace("<theirs>", str(theirs).rstrip("/"))
    errors.append(f"{w.source}: --command already sets {word.raw}, but elxpk writes {mine}{_sep(fix)}{fix}")
    return False


def _sep(fix: str) -> str:
    return " " if fix.startswith("(") else "; "


def _flag_true(inv: cmd.Invocation, key: str) -> bool:
    text = inv.value(key)
    try:
        return text is not None and parse_value(key, text) is True
    except ValueError:
        return False


def _check_command_values(inv: cmd.Invocation, written: set[str], container_env: Mapping[str, str],
                          errors: list[str]) -> None:
    """Values --command itself gives to keys elxpk knows, checked against MaxText's own rules (a key also
    set by an M_ variable of --env is refused, as MaxText does)."""
    for key, word in inv.overrides.items():
        env_name = ENV_PREFIX + key.upper()
        if key not in written and env_name in container_env:
            errors.append(f"--env {env_name}={container_env[env_name]}: --command also sets {word.raw}, and "
                          f"MaxText refuses a key set both as {env_name} and on its command line; drop one")
        if key not in KEYS or key in written or word.dynamic:
            continue
        try:
            value = parse_value(key, word.value.split("=", 1)[1])
        except ValueError as exc:
            errors.append(f"--command {word.raw}: {exc}")
            continue
        reason = KEYS[key].problem(value)
        if reason:
            errors.append(f"--command {word.raw}: {reason}")

"""The settings table as Markdown: the launcher -> trainer mapping (docs/interfaces.md) and every
setting of `python -m trainer` with its default and bounds (docs/trainer.md).

Each page embeds its table between two markers; tests/trainer/test_contract_docs.py checks them and
rewrites them with `pytest --update-goldens`, so the pages cannot drift from the contract.
"""

from __future__ import annotations

from elxpk_contract.presets import SHAPE_SETTINGS
from elxpk_contract.settings import (
    FIELDS,
    LAUNCHER_DERIVED,
    LAUNCHER_FLAG,
    Setting,
    bounds_text,
    env_name,
    exposed,
    flag_name,
)

BEGIN = "<!-- settings-table:begin (generated from elxpk_contract/settings.py) -->"
END = "<!-- settings-table:end -->"
TRAINER_BEGIN = "<!-- trainer-settings:begin (generated from elxpk_contract/settings.py) -->"
TRAINER_END = "<!-- trainer-settings:end -->"


def _trainer_flag(f: Setting) -> str:
    flag = flag_name(f.name)
    if f.type == "bool":
        return f"`{flag}/--no-{flag[2:]}`"
    return f"`{flag}`"


def _env(f: Setting) -> str:
    text = f"`{env_name(f.name)}`"
    if f.type == "bool":
        return text + " (`true`/`false`)"
    if f.choices:
        return text + " (" + ", ".join(f"`{c}`" for c in f.choices) + ")"
    return text


def _launcher(f: Setting) -> str:
    if f.expose == LAUNCHER_FLAG:
        return f"`{flag_name(f.name)}`"
    return f.derived_from


def launcher_table() -> str:
    """One row per setting the launcher passes: its own flags first, then the ones it derives."""
    rows = ["| launcher flag | env var | trainer flag | MaxText name |", "|---|---|---|---|"]
    for f in [*exposed(LAUNCHER_FLAG), *exposed(LAUNCHER_DERIVED)]:
        maxtext = f"`{f.maxtext}`" if f.maxtext else "—"
        rows.append(f"| {_launcher(f)} | {_env(f)} | {_trainer_flag(f)} | {maxtext} |")
    return "\n".join(rows) + "\n"


def _default(f: Setting) -> str:
    if f.name in SHAPE_SETTINGS:
        return "from `--model`"
    if f.default is None or f.default == ():
        return f"`{f.resolved_default}`" if f.resolved_default else "none"
    if isinstance(f.default, bool):
        return "on" if f.default else "off"
    return f"`{f.default}`"


def trainer_table() -> str:
    """Every setting of `python -m trainer`: flag, env var, default, bounds or choices, meaning."""
    rows = ["| flag | env var | default | bounds | meaning |", "|---|---|---|---|---|"]
    for f in FIELDS.values():
        if f.internal:
            continue
        flag = _trainer_flag(f) + (" (repeatable)" if f.repeatable else "")
        meaning = f.help.replace("|", "\\|")
        rows.append(f"| {flag} | `{env_name(f.name)}` | {_default(f)} | {bounds_text(f.name) or '—'} | {meaning} |")
    return "\n".join(rows) + "\n"


def embed(page: str, begin: str = BEGIN, end: str = END) -> str:
    """`page` with the text between `begin` and `end` replaced by the current table (the launcher
    mapping by default, the trainer's settings for TRAINER_BEGIN/TRAINER_END)."""
    head, found, rest = page.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not found or not found_end:
        raise ValueError(f"the page has no {begin!r} ... {end!r} block")
    table = trainer_table() if begin == TRAINER_BEGIN else launcher_table()
    return f"{head}{begin}\n{table}{end}{tail}"

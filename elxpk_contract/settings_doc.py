"""The launcher -> trainer settings mapping as a Markdown table, generated from the settings table.

docs/interfaces.md embeds this table between two markers; tests/trainer/test_contract_docs.py checks it
and rewrites it with `pytest --update-goldens`, so the page cannot drift from the contract.
"""

from __future__ import annotations

import dataclasses

from elxpk_contract.settings import LAUNCHER_DERIVED, LAUNCHER_FLAG, env_name, exposed, flag_name

BEGIN = "<!-- settings-table:begin (generated from elxpk_contract/settings.py) -->"
END = "<!-- settings-table:end -->"


def _trainer_flag(f: dataclasses.Field) -> str:
    flag = flag_name(f.name)
    if f.type == "bool":
        return f"`{flag}/--no-{flag[2:]}`"
    return f"`{flag}`"


def _env(f: dataclasses.Field) -> str:
    text = f"`{env_name(f.name)}`"
    if f.type == "bool":
        return text + " (`true`/`false`)"
    if f.metadata["choices"]:
        return text + " (" + ", ".join(f"`{c}`" for c in f.metadata["choices"]) + ")"
    return text


def _launcher(f: dataclasses.Field) -> str:
    if f.metadata["expose"] == LAUNCHER_FLAG:
        return f"`{flag_name(f.name)}`"
    return f.metadata["derived_from"]


def launcher_table() -> str:
    """One row per setting the launcher passes: its own flags first, then the ones it derives."""
    rows = ["| launcher flag | env var | trainer flag | MaxText name |", "|---|---|---|---|"]
    for f in [*exposed(LAUNCHER_FLAG), *exposed(LAUNCHER_DERIVED)]:
        maxtext = f"`{f.metadata['maxtext']}`" if f.metadata["maxtext"] else "—"
        rows.append(f"| {_launcher(f)} | {_env(f)} | {_trainer_flag(f)} | {maxtext} |")
    return "\n".join(rows) + "\n"


def embed(page: str) -> str:
    """`page` with the text between BEGIN and END replaced by the current table."""
    head, found, rest = page.partition(BEGIN)
    _, found_end, tail = rest.partition(END)
    if not found or not found_end:
        raise ValueError(f"the page has no {BEGIN!r} ... {END!r} block")
    return f"{head}{BEGIN}\n{launcher_table()}{END}{tail}"

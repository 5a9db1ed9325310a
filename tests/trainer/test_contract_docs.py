"""docs/interfaces.md's settings table is the contract's, and no doc or comment points outside the repo.

Regenerate the table with `pytest tests/trainer/test_contract_docs.py --update-goldens`.
"""

from __future__ import annotations

from pathlib import Path

from elxpk_contract.settings import LAUNCHER_DERIVED, LAUNCHER_FLAG, env_name, exposed
from elxpk_contract.settings_doc import BEGIN, END, embed, launcher_table

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "interfaces.md"


def test_interfaces_page_carries_the_generated_settings_table(update_goldens):
    page = PAGE.read_text(encoding="utf-8")
    if update_goldens:
        PAGE.write_text(embed(page), encoding="utf-8")
        page = PAGE.read_text(encoding="utf-8")
    assert page == embed(page), "docs/interfaces.md: regenerate the settings table with --update-goldens"
    assert page.count(BEGIN) == 1 and page.count(END) == 1


def test_table_has_one_row_per_setting_the_launcher_passes():
    rows = launcher_table().splitlines()[2:]
    settings = [*exposed(LAUNCHER_FLAG), *exposed(LAUNCHER_DERIVED)]
    assert len(rows) == len(settings) >= 8
    for row, f in zip(rows, settings, strict=True):
        assert f"`{env_name(f.name)}`" in row.split(" | ")[1]
        if f.maxtext:
            assert row.endswith(f"| `{f.maxtext}` |")


def test_trainer_docs_do_not_point_outside_the_repository():
    outside = "/".join(("..", "shared"))  # the notes folder beside a developer's checkout
    for path in (PAGE, ROOT / "docs" / "trainer.md"):
        assert outside not in path.read_text(encoding="utf-8"), path


def test_trainer_page_carries_the_generated_settings_table(update_goldens):
    from elxpk_contract.settings_doc import TRAINER_BEGIN, TRAINER_END

    page_path = ROOT / "docs" / "trainer.md"
    page = page_path.read_text(encoding="utf-8")
    if update_goldens:
        page_path.write_text(embed(page, TRAINER_BEGIN, TRAINER_END), encoding="utf-8")
        page = page_path.read_text(encoding="utf-8")
    assert page == embed(page, TRAINER_BEGIN, TRAINER_END), \
        "docs/trainer.md: regenerate the settings table with --update-goldens"
    assert page.count(TRAINER_BEGIN) == 1 and page.count(TRAINER_END) == 1


def test_generated_settings_table_is_fresh():
    """elxpk_contract/settings_table.py holds TrainerConfig's rows as plain data (the launcher reads them without
    building the dataclass). After editing the table: .venv/bin/python -m elxpk_contract.settings_build"""
    from elxpk_contract import settings_build

    assert settings_build.PATH.read_text(encoding="utf-8") == settings_build.generate(), \
        "stale: run .venv/bin/python -m elxpk_contract.settings_build"


def test_setting_rows_say_what_the_dataclass_fields_say():
    import dataclasses

    from elxpk_contract.settings import FIELDS, TrainerConfig

    assert list(FIELDS) == [f.name for f in dataclasses.fields(TrainerConfig)]
    for f in dataclasses.fields(TrainerConfig):
        row = FIELDS[f.name]
        assert (row.type, row.default, row._asdict()) == (f.type, f.default, {
            "name": f.name, "type": f.type, "default": f.default, **f.metadata}), f.name

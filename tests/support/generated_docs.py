"""A docs page that carries a table generated from the code: rewritten with --update-goldens, else checked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def check_generated(page_path: Path, embed: Callable[[str], str], begin: str, end: str, *, update: bool,
                    what: str) -> str:
    """Assert `page_path` holds exactly what `embed` makes of it, once between `begin` and `end` (with
    `update`, write it first); the page's text."""
    page = page_path.read_text(encoding="utf-8")
    if update:
        page_path.write_text(embed(page), encoding="utf-8")
        page = page_path.read_text(encoding="utf-8")
    assert page == embed(page), f"{page_path.name}: regenerate {what} with --update-goldens"
    assert page.count(begin) == 1 and page.count(end) == 1
    return page

"""tests/support/install_cache.py: built once per key, a failed build leaves nothing, an incomplete folder is
rebuilt."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.install_cache import cached_build, content_key


def test_a_key_is_built_once_and_found_after(tmp_path, monkeypatch):
    monkeypatch.setenv("ELXPK_CACHE_DIR", str(tmp_path))
    builds: list[Path] = []

    def build(partial: Path) -> None:
        builds.append(partial)
        partial.mkdir()
        (partial / "done").write_text("x")

    key = content_key("typer==0.12.5", b"click==8.1.8")
    first = cached_build("kind", key, build, done="done")
    assert cached_build("kind", key, build, done="done") == first == tmp_path / "kind" / key
    assert len(builds) == 1 and (first / "done").read_text() == "x" and not builds[0].exists()
    assert content_key("typer==0.12.6", b"click==8.1.8") != key


def test_a_failed_build_leaves_nothing_and_an_incomplete_folder_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("ELXPK_CACHE_DIR", str(tmp_path))

    def fail(partial: Path) -> None:
        partial.mkdir()
        raise RuntimeError("no index")

    with pytest.raises(RuntimeError):
        cached_build("kind", "k", fail, done="done")
    assert sorted(p.name for p in (tmp_path / "kind").iterdir()) == ["k.lock"]
    (tmp_path / "kind" / "k").mkdir()  # a folder without its `done` mark: killed half-way in an older layout
    made = cached_build("kind", "k", lambda p: (p.mkdir(), (p / "done").touch()), done="done")
    assert (made / "done").exists()

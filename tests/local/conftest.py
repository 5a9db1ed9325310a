from __future__ import annotations

import json

import pytest

from elxpk.cli.main import main


@pytest.fixture
def cli(capsys):
    """Run the elxpk CLI in-process; returns (exit code, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def cli_json(cli):
    def run(*argv: str) -> tuple[int, dict]:
        code, out, _ = cli(*argv, "-o", "json")
        return code, json.loads(out)

    return run

"""docs/cluster.md's notifications: the flag table is generated from elxpk/notify/flags.py, and each example
command runs as written (against a captured workload on the fake API server, its webhook a loopback one)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from elxpk.notify import flags as table
from tests.cluster.captured import name_of, seed
from tests.cluster.conftest import run_cli
from tests.support.generated_docs import check_generated
from tests.support.webhook_server import webhook

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cluster.md"


def test_the_notify_flag_table_is_generated(update_goldens):
    page = check_generated(PAGE, table.embed, table.BEGIN, table.END, update=update_goldens,
                           what="the notify flag table")
    assert all(f"| `{row.flag}" in page for row in table.FLAGS)


def _examples() -> list[list[str]]:
    block = PAGE.read_text(encoding="utf-8").split("<!-- notify-examples:begin -->", 1)[1]
    block = block.split("<!-- notify-examples:end -->", 1)[0]
    joined = re.sub(r"\\\n\s*", "", block)
    return [shlex.split(line) for line in joined.splitlines() if line.startswith("elxpk ")]


def test_the_docs_examples_run_as_written(fake, capsys, k, tmp_path, monkeypatch):
    """The workload of the example is the captured failed one (its name swapped in), the webhook's address
    the loopback server's; every other word as the page has it."""
    examples = _examples()
    assert len(examples) == 2
    monkeypatch.chdir(tmp_path)  # the examples write incidents.jsonl and alerts.jsonl here
    name = name_of(seed(fake, "failed"))
    for argv in examples:
        with webhook(["200"]) as hook:
            words = [name if w == "qwen-elastic" else hook.url if w.startswith("https://") else w for w in argv[1:]]
            code, _, err = run_cli(capsys, *words, *k)
        assert code == 0 and "not delivered" not in err, err
        (body,) = [json.loads(b) for _, b in hook.bodies]
        slack = "--notify-format" in argv
        assert (set(body) == {"text"}) if slack else (body["kind"] == "failed" and body["workload"] == name)
    assert (tmp_path / "incidents.jsonl").stat().st_size > 0
    test, alert = [json.loads(line) for line in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert (test["kind"], alert["kind"]) == ("test", "failed")  # the command's test delivery at the start, then the alert
    documented = json.loads(PAGE.read_text(encoding="utf-8").split("```json\n", 1)[1].split("```", 1)[0])
    assert set(documented) == set(alert)  # the page's document has the fields an alert has

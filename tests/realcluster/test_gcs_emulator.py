"""The incident record's `gs://` writes (elxpk/cluster/api/gcs.py) against fake-gcs-server, the emulator gcsfs's
own tests use, instead of tests/support/fake_gcs.py: reads with their generation, the generation
precondition, and concurrent recorders appending without losing or repeating a line."""

from __future__ import annotations

import threading
from urllib.parse import quote

import pytest
import requests

from elxpk.cluster.api.gcs import Gcs
from tools.testcluster.kubeapi import LocalCluster


@pytest.fixture()
def bucket(testcluster: LocalCluster, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", testcluster.storage_emulator_host)
    name = "b-" + request.node.name.lower().replace("_", "-")[:50]
    host = testcluster.storage_emulator_host
    made = requests.post(f"{host}/storage/v1/b", json={"name": name}, timeout=30)
    assert made.status_code in (200, 409), made.text
    for item in requests.get(f"{host}/storage/v1/b/{name}/o", timeout=30).json().get("items", []):
        gone = requests.delete(f"{host}/storage/v1/b/{name}/o/{quote(item['name'], safe='')}", timeout=30)
        assert gone.status_code in (200, 204), gone.text  # an earlier run's objects on a reused cluster
    return name


def test_read_write_and_the_generation_precondition(bucket: str) -> None:
    gcs, url = Gcs(), f"gs://{bucket}/incidents.jsonl"
    assert gcs.read(url) == (None, 0)
    assert gcs.write(url, b"a\n", if_generation_match=0)  # 0: only if it does not exist
    assert not gcs.write(url, b"b\n", if_generation_match=0)
    content, generation = gcs.read(url)
    assert (content, generation > 0) == (b"a\n", True)
    assert not gcs.write(url, b"c\n", if_generation_match=generation + 1)
    assert gcs.write(url, b"a\nc\n", if_generation_match=generation)
    assert gcs.read(url)[0] == b"a\nc\n"


def test_concurrent_recorders_lose_and_repeat_nothing(bucket: str) -> None:
    url, writers, each = f"gs://{bucket}/incidents.jsonl", 4, 10
    errors: list[BaseException] = []

    def record(writer: int) -> None:
        gcs = Gcs()
        try:
            for i in range(each):
                assert gcs.append_lines(url, lambda _, w=writer, i=i: [f"{w}-{i}"]) == 1
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=record, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    lines = (Gcs().read(url)[0] or b"").decode().splitlines()
    assert sorted(lines) == sorted(f"{w}-{i}" for w in range(writers) for i in range(each))

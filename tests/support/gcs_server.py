"""fake-gcs-server alone (the binary `tools/testcluster build` makes), without the rest of the control plane:
a real Cloud Storage JSON API for gcsfs and tensorstore, started in about a second.

Tests that use it live in tests/realcluster, whose CI lanes build the control plane first; elsewhere, when
it is not built, they are skipped with the reason (under CI=true they fail instead, as the tier does).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from tests.support.loopback import free_port

REPO = Path(__file__).resolve().parents[2]


def binary() -> Path:
    spec = importlib.util.spec_from_file_location("testcluster_main", REPO / "tools" / "testcluster" / "__main__.py")
    assert spec and spec.loader
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool.bin_dir() / "fake-gcs-server"


@contextmanager
def fake_gcs_server(data: Path) -> Iterator[str]:
    """fake-gcs-server on a free loopback port, its memory backend (as tools/testcluster runs it); its URL."""
    path = binary()
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{path} is not built: run `python tools/testcluster build`")
        pytest.skip(f"fake-gcs-server is not built ({path}): run `python tools/testcluster build` once")
    port = free_port()
    data.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([str(path), "-scheme=http", "-host=127.0.0.1", f"-port={port}", "-backend=memory",
                               f"-data={data}", f"-public-host=127.0.0.1:{port}", f"-external-url={url}",
                               "-log-level=warn"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(f"{url}/storage/v1/b", timeout=2).ok:
                    break
            except requests.ConnectionError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "fake-gcs-server did not start"
            time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def make_bucket(url: str, name: str) -> None:
    made = requests.post(f"{url}/storage/v1/b", json={"name": name}, timeout=30)
    assert made.status_code in (200, 409), made.text


def object_names(url: str, bucket: str, prefix: str) -> list[str]:
    listed = requests.get(f"{url}/storage/v1/b/{bucket}/o", params={"prefix": prefix}, timeout=30).json()
    return sorted(item["name"] for item in listed.get("items", []))


def emulator_env(url: str) -> dict[str, str]:
    """What sends gcsfs and tensorstore (orbax's arrays) to `url` (elxpk_storage/gcs_auth.py)."""
    return {"STORAGE_EMULATOR_HOST": url, "TENSORSTORE_GCS_HTTP_URL": url, "GOOGLE_AUTH_TOKEN_FOR_TESTING": "anon"}

"""What a kubeconfig can name, made real on disk for the tests: exec plugins as small scripts (one that
hangs, one that floods, one that fails, one that answers), a FIFO, /dev/zero, a directory, a missing path."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

EXEC_API = "client.authentication.k8s.io/v1beta1"


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def plugins(where: Path, token: str = "test-token") -> dict[str, Path]:
    """Exec plugins by what they do. `good` appends a line to `calls` each time it runs."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "plain.txt").write_text("not a program\n")
    answer = json.dumps({"apiVersion": EXEC_API, "kind": "ExecCredential",
                         "status": {"token": token, "expirationTimestamp": "2000-01-01T00:00:00Z"}})
    return {
        "hang": script(where / "hang.sh", "exec sleep 1000\n"),
        "flood": script(where / "flood.sh", "exec yes\n"),  # 1 GB and more, as fast as the pipe takes it
        "exit3": script(where / "exit3.sh", "echo 'starting' >&2\necho 'login expired: run login' >&2\nexit 3\n"),
        "garbage": script(where / "garbage.sh", "echo '{not json'\n"),
        "good": script(where / "good.sh", f"echo run >> '{where / 'calls'}'\necho '{answer}'\n"),
        "not_executable": (where / "plain.txt"),
        # prints its credential, then does not end: itself, or a child that keeps its stdout open
        "lingers": script(where / "lingers.sh", f"echo '{answer}'\nexec sleep 1000\n"),
        "daemon": script(where / "daemon.sh", f"echo '{answer}'\n( sleep 1000 ) &\nexit 0\n"),
        "unicode_token": script(where / "unicode.sh", "echo '" + answer.replace(token, "t\\u00f6k") + "'\n"),
        "nan_token": script(where / "nan.sh", "echo '" + answer.replace(f'"{token}"', "NaN") + "'\n"),
    }


def special_files(where: Path) -> dict[str, str]:
    """Paths of each kind a file field may wrongly name, with the words the refusal uses."""
    where.mkdir(parents=True, exist_ok=True)
    fifo = where / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    (where / "dir").mkdir(exist_ok=True)
    links = {"zero-link": "/dev/zero", "fifo-link": str(fifo), "dangling-link": str(where / "nowhere")}
    for name, target in links.items():
        if not os.path.lexists(where / name):
            os.symlink(target, where / name)
    return {str(fifo): "FIFO", "/dev/zero": "character device", str(where / "dir"): "directory",
            str(where / "missing"): "no such file", str(where / "zero-link"): "character device",
            str(where / "fifo-link"): "FIFO", str(where / "dangling-link"): "no such file"}


def kubeconfig(server: Any = "http://127.0.0.1:1", cluster: dict | None = None, user: dict | None = None,
               context: str = "x", contexts: list | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
            "users": [{"name": "u", "user": user if user is not None else {"token": "test-token"}}],
            "contexts": contexts or [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}


def write(path: Path, config: Any) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path

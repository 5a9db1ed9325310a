"""Follow a JSON-lines file that another process appends to (the multi-controller trainer's records)."""

from __future__ import annotations

from pathlib import Path

from elxpk.json_lines import parse_lines


class JsonlTail:
    """Returns each complete line once; a partial last line waits for its newline."""

    def __init__(self, path: Path, *, from_end: bool = False) -> None:
        self.path = path
        self._offset = path.stat().st_size if from_end and path.exists() else 0
        self._partial = b""

    def read(self) -> list[dict]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        cut = data.rfind(b"\n") + 1
        self._partial = data[cut:]
        return list(parse_lines(data[:cut].decode("utf-8", errors="replace")).records)

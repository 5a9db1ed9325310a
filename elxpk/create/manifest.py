"""What rendering produces and submit sends: the objects, in apply order, and their exact YAML text."""

from __future__ import annotations

import json
from typing import Any, NamedTuple


class Manifest(NamedTuple):
    """`objects` are plain dicts parsed from `text`, so what `--dry-run` prints is what submit sends."""

    objects: tuple[dict[str, Any], ...]
    text: str

    def to_yaml(self) -> str:
        """Multi-document YAML, exactly as rendered (comments included)."""
        return self.text

    def to_json(self) -> str:
        """One object as itself; several as a kubectl-style `List`."""

        if len(self.objects) == 1:
            body: Any = self.objects[0]
        else:
            body = {"apiVersion": "v1", "kind": "List", "items": list(self.objects)}
        return json.dumps(body, indent=2, ensure_ascii=False) + "\n"

    def dump(self, fmt: str) -> str:
        return self.to_json() if fmt == "json" else self.to_yaml()


def parse_documents(text: str) -> tuple[dict[str, Any], ...]:
    """The YAML documents of `text` as dicts (empty documents skipped), with the C loader when present."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs = tuple(d for d in yaml.load_all(text, Loader=loader) if d is not None)
    for doc in docs:
        if not isinstance(doc, dict):
            raise ValueError(f"a manifest document is a {type(doc).__name__}, not a mapping")
    return docs

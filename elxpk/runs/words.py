"""Counted nouns in output: "1 recovery", "2 recoveries", never "recovery(ies)"."""

from __future__ import annotations

_IRREGULAR = {"recovery": "recoveries", "is": "are", "was": "were"}


def plural(count: int, noun: str) -> str:
    """`count` and the noun, singular for exactly one: plural(2, "recovery") == "2 recoveries"."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {_IRREGULAR.get(noun, noun + 's')}"

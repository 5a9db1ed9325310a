"""A cheap compile of the one regex that PyYAML's import compiles, for the CLI's start-up.

`yaml.reader.Reader.NON_PRINTABLE` is a negated character class reaching U+10FFFF; `re` compiles it at
`import yaml` in ~57M instructions, a tenth of `workload create --dry-run` (which needs yaml for the
parse-back). The same set, written as the seven small ranges it excludes, compiles in ~4M. `seed()` puts
that pattern in `re`'s cache under PyYAML's spelling, so the import finds it compiled. Only the lookup
key is PyYAML's: the two match exactly the same characters (tests/launcher/test_yaml_reader_pattern.py
checks every code point, and that PyYAML still spells it so). Where `re` keeps no such cache, or PyYAML
spells it otherwise, nothing is seeded and the import compiles its own, as before.
"""

from __future__ import annotations

import re

YAML_SPELLING = "[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]"
EXCLUDED_RANGES = "[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x84\x86-\x9F\uD800-\uDFFF\uFFFE\uFFFF]"


def seed() -> bool:
    """Seed `re`'s cache (before yaml is imported); False when there is no cache of the known shape."""
    cache = getattr(re, "_cache", None)
    if not isinstance(cache, dict):
        return False
    cache.setdefault((str, YAML_SPELLING, 0), re.compile(EXCLUDED_RANGES))
    return True

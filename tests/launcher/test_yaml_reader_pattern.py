"""elxpk/yaml_reader_pattern.py: the pattern seeded under PyYAML's spelling matches what PyYAML's does."""

from __future__ import annotations

import re
import subprocess
import sys

from elxpk import yaml_reader_pattern


def test_the_seeded_pattern_matches_exactly_the_characters_of_yamls():
    every = "".join(map(chr, range(0x110000)))  # every code point, surrogates included
    yamls = re.compile(yaml_reader_pattern.YAML_SPELLING)
    ours = re.compile(yaml_reader_pattern.EXCLUDED_RANGES)
    assert ours.findall(every) == yamls.findall(every)
    assert len(ours.findall(every)) == 2111


def test_pyyaml_still_spells_its_pattern_so():
    import yaml.reader

    assert yaml.reader.Reader.NON_PRINTABLE.pattern in (yaml_reader_pattern.YAML_SPELLING,
                                                        yaml_reader_pattern.EXCLUDED_RANGES)
    assert yaml.reader.Reader.NON_PRINTABLE.flags == re.compile(yaml_reader_pattern.YAML_SPELLING).flags


def test_a_dry_run_finds_it_compiled_and_yaml_still_refuses_what_it_refused():
    code = (
        "import io, sys\n"
        "from elxpk.cli.main import main\n"
        "sys.stdout = io.StringIO()\n"
        "rc = main(['workload', 'create', '--workload', 'w', '--tpu-type', 'v5p-8', '--command', 'x', '--dry-run'])\n"
        "import yaml\n"
        "try:\n"
        "    yaml.safe_load('a: \\x07')\n"
        "    refused = False\n"
        "except yaml.reader.ReaderError as exc:\n"
        "    refused = 'special characters are not allowed' in str(exc)\n"
        f"seeded = yaml.reader.Reader.NON_PRINTABLE.pattern == {yaml_reader_pattern.EXCLUDED_RANGES!r}\n"
        "print(rc, seeded, refused, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stderr.split() == ["0", "True", "True"], done.stderr

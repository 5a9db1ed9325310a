"""What a story's failure message shows of one pod's container log: how the container ended and why.

The last lines alone did not say why: a trainer that jax ends with LOG(FATAL) writes its reason on one
`F` line, then a "Check failure stack trace" of a dozen frames, then the wrapper's `Aborted` and
`EXIT_CODE=134` lines. The last 15 lines of part 3's extra restart (#31, at a2ee08f) held only the frames,
and the reason was gone with the lane's cluster. So the digest keeps the lines that say why (glog's fatal
and error lines, the trainer's `error:` lines, Python's fatal errors and exceptions), then the last lines
without the stack frames.
"""

from __future__ import annotations

import re

# glog's F (fatal) and E (error) lines, the trainer's own one-line outcome, Python's last words.
_WHY = re.compile(r"^(?:[FE]\d{4} \d\d:\d\d:\d\d|error: |cause: |warning: |Fatal Python error|"
                  r"[A-Za-z_.]*(?:Error|Exception): |elxpk: line \d+: .*(?:Aborted|Killed|Segmentation))")
_FRAME = re.compile(r"^\s+@\s+0x[0-9a-f]+\s|^\*\*\* Check failure stack trace")
_GLOG_SOURCE = re.compile(r"^[FE]\d{4} [\d:.]+\s+\d+ (\S+\.(?:cc|h|cpp):\d+)\]")
WHY_LINES = 12  # the first lines that say why (the first of each glog source line only)
LAST_LINES = 8
LINE_CHARS = 700  # glog's fatal line gives the status after some 300 characters of advice


def digest(text: str) -> str:
    """The lines of a container log that say how it ended and why: the first WHY_LINES that give a reason
    (one per glog source location: a service repeats its error every retry), then the last LAST_LINES
    that are not stack frames, each cut to LINE_CHARS."""
    lines = text.splitlines()
    why, sources = [], set()
    for line in lines:
        if not _WHY.match(line):
            continue
        source = _GLOG_SOURCE.match(line)
        if source is not None:
            if source.group(1) in sources:
                continue
            sources.add(source.group(1))
        why.append(line)
        if len(why) == WHY_LINES:
            break
    last = [line for line in lines if not _FRAME.match(line)][-LAST_LINES:]
    shown = [*(["why:"] + why if why else []), "last:", *last]
    return "\n".join(line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " [...]" for line in shown)


def started(text: str) -> str:
    """The date of the wrapper's start line (`elxpk start: DATE`), which tells a restart's pods from the
    first attempt's; "?" where there is none."""
    found = re.search(r"^elxpk start: (.*)$", text, re.MULTILINE)
    return found.group(1) if found else "?"

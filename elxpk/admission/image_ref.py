"""Container image references as the kubelet parses them (InvalidImageName otherwise), vendored from the
grammar of github.com/distribution/reference (regexp.go, normalize.go `ParseNormalizedNamed`):

    reference  := name [ ":" tag ] [ "@" digest ]
    name       := [domain '/'] path-component ['/' path-component]*
    domain     := domain-component ['.' domain-component]* [':' port-number]  (or [IPv6])
    path-component := [a-z0-9]+ (separator [a-z0-9]+)*,  separator := [_.] | __ | [-]+
    tag        := [\\w][\\w.-]{0,127}
    digest     := algorithm ":" hex{32,}

The first component is a domain only when it holds '.' or ':' or is `localhost`, so `UPPER/Img:Tag` is a
path with capitals: refused, as the kubelet would refuse it at pull time. The name is at most 255 characters.
"""

from __future__ import annotations

import re

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|{_IPV6})(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(rf"((?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)(?::({_TAG}))?(?:@({_DIGEST}))?",
                        re.ASCII)
NAME_MAX = 255
_ANCHORED_HEX = re.compile(r"[a-f0-9]{64}")


def image_problem(ref: str) -> str | None:
    """Why the kubelet would refuse `ref` (one phrase), or None."""
    if not ref:
        return "empty"
    if ref != ref.strip() or any(c.isspace() for c in ref):
        return "has spaces"
    first, slash, _ = ref.partition("/")
    if slash and not ("." in first or ":" in first or first == "localhost") and first != first.lower():
        return "has capitals in its repository path (only a registry host may have them)"
    match = _REFERENCE.fullmatch(ref)
    if match is None:
        if ref.lower() != ref and _REFERENCE.fullmatch(ref.lower()):
            return "has capitals in its repository path (only a registry host may have them)"
        return ("is not an image reference ([registry/]path[:tag][@digest]; lowercase path, tag of letters, "
                "digits, '_', '.', '-')")
    name = match.group(1)
    if len(name) > NAME_MAX:
        return f"its name is longer than {NAME_MAX} characters"
    if _ANCHORED_HEX.fullmatch(name):
        return "its name is 64 hexadecimal characters, which the runtime reads as an image id"
    return None

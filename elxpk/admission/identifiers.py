"""Kubernetes' identifier rules (DNS labels, subdomains, label values, qualified names), from
kubernetes/kubernetes `staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go`.

The patterns are elxpk/k8s_names.py's (one copy for every check of a name). Each function returns the
problems (an empty list when valid), with upstream's messages. Go's regexp `^...$` anchors the whole text,
so these use `re.fullmatch`: Python's `$` would accept a final newline.
"""

from __future__ import annotations

import re

from elxpk import k8s_names
from elxpk.k8s_names import DNS1035_LABEL_MAX, DNS1123_LABEL_MAX, DNS1123_SUBDOMAIN_MAX, LABEL_VALUE_MAX

_DNS1123_LABEL_RE = k8s_names.DNS1123_LABEL
_DNS1123_SUBDOMAIN_RE = k8s_names.DNS1123_SUBDOMAIN
_DNS1035_LABEL_RE = k8s_names.DNS1035_LABEL
_LABEL_VALUE_RE = k8s_names.LABEL_VALUE
__all__ = ["DNS1035_LABEL_MAX", "DNS1123_LABEL_MAX", "DNS1123_SUBDOMAIN_MAX", "LABEL_VALUE_MAX", "QUALIFIED_NAME_MAX"]
QUALIFIED_NAME_MAX = 63

_QUALIFIED_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_HTTP_PATH_RE = re.compile(r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+")


def _too_long(limit: int) -> str:
    return f"must be no more than {limit} characters"


def dns1123_label(value: str) -> list[str]:
    """`IsDNS1123Label`: namespaces, container names, port names."""
    problems = [_too_long(DNS1123_LABEL_MAX)] if len(value) > DNS1123_LABEL_MAX else []
    if not _DNS1123_LABEL_RE.fullmatch(value):
        problems.append("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                        "and must start and end with an alphanumeric character")
    return problems


def dns1123_subdomain(value: str) -> list[str]:
    """`IsDNS1123Subdomain`: object names of most kinds."""
    problems = [_too_long(DNS1123_SUBDOMAIN_MAX)] if len(value) > DNS1123_SUBDOMAIN_MAX else []
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        problems.append("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                        "'.', and must start and end with an alphanumeric character")
    return problems


def dns1035_label(value: str) -> list[str]:
    """`IsDNS1035Label`: Service names, and so JobSet's child Job names and the network subdomain."""
    problems = [_too_long(DNS1035_LABEL_MAX)] if len(value) > DNS1035_LABEL_MAX else []
    if not _DNS1035_LABEL_RE.fullmatch(value):
        problems.append("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
                        "an alphabetic character, and end with an alphanumeric character")
    return problems


def label_value(value: str) -> list[str]:
    """`IsValidLabelValue`."""
    problems = [_too_long(LABEL_VALUE_MAX)] if len(value) > LABEL_VALUE_MAX else []
    if not _LABEL_VALUE_RE.fullmatch(value):
        problems.append("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
                        "'.', and must start and end with an alphanumeric character")
    return problems


def qualified_name(value: str) -> list[str]:
    """`IsQualifiedName`: label and annotation keys, finalizers: `[prefix/]name`, prefix a DNS subdomain."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        problems: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            problems = ["prefix part must be non-empty"]
        else:
            problems = [f"prefix part {p}" for p in dns1123_subdomain(prefix)]
    else:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                "with an alphanumeric character, with an optional DNS subdomain prefix and '/'"]
    if not name:
        problems.append("name part must be non-empty")
    else:
        if len(name) > QUALIFIED_NAME_MAX:
            problems.append(f"name part {_too_long(QUALIFIED_NAME_MAX)}")
        if not _QUALIFIED_NAME_RE.fullmatch(name):
            problems.append("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                            "end with an alphanumeric character")
    return problems


def domain_prefixed_path(value: str) -> list[str]:
    """`IsDomainPrefixedPath`: `managedBy` values such as `kueue.x-k8s.io/multikueue`."""
    if not value:
        return ["Required value"]
    domain, slash, path = value.partition("/")
    if not slash or not path:
        return ["must be a domain-prefixed path (such as \"acme.io/foo\")"]
    problems = [f"domain {p}" for p in dns1123_subdomain(domain)]
    if not _HTTP_PATH_RE.fullmatch(path):
        problems.append("path must be a valid HTTP path")
    return problems

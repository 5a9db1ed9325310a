"""Kubernetes' name patterns, once: DNS-1123 labels and subdomains, DNS-1035 labels, label values.

From kubernetes/kubernetes `staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go`. Every
check of a name reads these (the admission rules in elxpk/admission/identifiers.py with upstream's
messages, the flags' own checks in elxpk/create/flag_checks.py, the namespace in elxpk/cluster/access/target.py,
a GCE resource name in elxpk/create/capacity.py). Use them with `fullmatch`: Go's `^...$` anchors the whole
text, and Python's `$` would accept a final newline. Standard library only: a ground module, read on every
start.
"""

from __future__ import annotations

import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
DNS1035_LABEL_MAX = 63
LABEL_VALUE_MAX = 63

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(_LABEL)  # namespaces, container names, port names
DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")  # object names of most kinds
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")  # Service names (and so a JobSet's name)
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def is_dns1123_label(text: str) -> bool:
    return len(text) <= DNS1123_LABEL_MAX and DNS1123_LABEL.fullmatch(text) is not None


def is_dns1123_subdomain(text: str) -> bool:
    return len(text) <= DNS1123_SUBDOMAIN_MAX and DNS1123_SUBDOMAIN.fullmatch(text) is not None


def is_dns1035_label(text: str) -> bool:
    return len(text) <= DNS1035_LABEL_MAX and DNS1035_LABEL.fullmatch(text) is not None


def is_label_value(text: str) -> bool:
    return len(text) <= LABEL_VALUE_MAX and LABEL_VALUE.fullmatch(text) is not None

"""The API server's checks of an object's type and metadata (rules 13 and 14), from kubernetes/kubernetes:

- `staging/src/k8s.io/apiextensions-apiserver/pkg/registry/customresource/validator.go` `ValidateTypeMeta`:
  apiVersion and kind are set and name the CRD's group/version and kind;
- `staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go` `ValidateObjectMetaAccessor`: name or
  generateName (a DNS subdomain: `NameIsDNSSubdomain`), namespace (`ValidateNamespaceName`, a DNS-1123
  label), `ValidateAnnotations` (qualified keys, 256 KiB in total), `ValidateFinalizers`, and
  `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go` `ValidateLabels`.

The same label and annotation rules apply to a pod template's metadata (`ValidatePodTemplateSpec`).
"""

from __future__ import annotations

from typing import Any

from elxpk.admission import identifiers
from elxpk.admission.violation import Violation, join

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # `TotalAnnotationSizeLimitB`
# `standardFinalizers` in kubernetes `pkg/apis/core/validation/validation.go`: the only unqualified ones.
STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


def type_meta_problems(obj: dict, api_version: str, kind: str) -> list[Violation]:
    """`ValidateTypeMeta`."""
    found = []
    if obj.get("apiVersion") != api_version:
        found.append(Violation("apiVersion", f"must be {api_version!r}, not {obj.get('apiVersion')!r}"))
    if obj.get("kind") != kind:
        found.append(Violation("kind", f"must be {kind!r}, not {obj.get('kind')!r}"))
    return found


def object_meta_problems(meta: Any, path: str = "metadata", *, namespaced: bool = True) -> list[Violation]:
    """`ValidateObjectMetaAccessor` for a create request (uid, resourceVersion and the like are the server's)."""
    if not isinstance(meta, dict):
        return [Violation(path, "Required value: metadata is an object with a name")]
    found = []
    name, generate = meta.get("name"), meta.get("generateName")
    if not name and not generate:
        found.append(Violation(join(path, "name"), "Required value: name or generateName is required"))
    for key, value in (("name", name), ("generateName", generate)):
        if not value:
            continue
        if not isinstance(value, str):
            found.append(Violation(join(path, key), "must be a string"))
            continue
        # A generateName is checked with the random suffix's room: upstream trims one trailing '-'.
        checked = value[:-1] if key == "generateName" and value.endswith("-") else value
        found += [Violation(join(path, key), f"Invalid value: {value!r}: {p}")
                  for p in identifiers.dns1123_subdomain(checked)]
    namespace = meta.get("namespace")
    if namespace not in (None, ""):
        if not namespaced:
            found.append(Violation(join(path, "namespace"), "Forbidden: not allowed on this type"))
        elif not isinstance(namespace, str):
            found.append(Violation(join(path, "namespace"), "must be a string"))
        else:
            found += [Violation(join(path, "namespace"), f"Invalid value: {namespace!r}: {p}")
                      for p in identifiers.dns1123_label(namespace)]
    found += label_problems(meta.get("labels"), join(path, "labels"))
    found += annotation_problems(meta.get("annotations"), join(path, "annotations"))
    for i, finalizer in enumerate(meta.get("finalizers") or []):
        found += _finalizer_problems(finalizer, join(join(path, "finalizers"), i))
    return found


def label_problems(labels: Any, path: str) -> list[Violation]:
    """`ValidateLabels`: qualified-name keys, label values."""
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [Violation(path, "must be a map of strings")]
    found = []
    for key, value in labels.items():
        key_s = str(key)
        found += [Violation(path, f"Invalid value: {key_s!r}: {p}") for p in identifiers.qualified_name(key_s)]
        if not isinstance(value, str):
            found.append(Violation(f"{path}[{key_s}]", f"must be a string, not {type(value).__name__}"))
            continue
        found += [Violation(path, f"Invalid value: {value!r}: {p}") for p in identifiers.label_value(value)]
    return found


def annotation_problems(annotations: Any, path: str) -> list[Violation]:
    """`ValidateAnnotations`: qualified-name keys (lower-cased first, as upstream), 256 KiB in total."""
    if annotations is None:
        return []
    if not isinstance(annotations, dict):
        return [Violation(path, "must be a map of strings")]
    found, total = [], 0
    for key, value in annotations.items():
        key_s = str(key)
        found += [Violation(path, f"Invalid value: {key_s!r}: {p}")
                  for p in identifiers.qualified_name(key_s.lower())]
        if not isinstance(value, str):
            found.append(Violation(f"{path}[{key_s}]", f"must be a string, not {type(value).__name__}"))
            continue
        total += len(key_s.encode("utf-8")) + len(value.encode("utf-8"))
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        found.append(Violation(path, f"Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes "
                                     f"({total} given)"))
    return found


def _finalizer_problems(finalizer: Any, path: str) -> list[Violation]:
    """`ValidateFinalizerName`: a qualified name, domain-prefixed unless it is a standard finalizer."""
    if not isinstance(finalizer, str):
        return [Violation(path, "must be a string")]
    found = [Violation(path, f"Invalid value: {finalizer!r}: {p}") for p in identifiers.qualified_name(finalizer)]
    if "/" not in finalizer and finalizer not in STANDARD_FINALIZERS:
        found.append(Violation(path, f"Invalid value: {finalizer!r}: name is neither a standard finalizer name "
                                     f"nor is it fully qualified"))
    return found

"""The checks of one flag's value alone, named by the `check` of its row in the flag table
(elxpk/create/flags.py). Each returns what follows `--flag 'value': ` in the one-line message (what is
wrong and the fix), or None. Rules that tie several flags together stay in elxpk/create/checks.py.
"""

from __future__ import annotations

from collections.abc import Callable

from elxpk.admission.image_ref import image_problem
from elxpk.create.flags import DEFAULT_GCS_LOCATION, DEFAULT_QUEUE
from elxpk.k8s_names import DNS1035_LABEL, is_dns1123_label, is_dns1123_subdomain, is_label_value


def workload_name(value: str) -> str | None:
    # Its length limit depends on the shape of the workload: elxpk/admission/names.py flag_problems.
    if DNS1035_LABEL.fullmatch(value):  # a Service name (the JobSet's headless Service)
        return None
    return "use a-z, 0-9 and '-', starting with a letter and ending with a letter or digit (e.g. my-run-1)"


def queue_name(value: str) -> str | None:
    if value and is_label_value(value):
        return None
    return ("must be a Kubernetes label value (at most 63 letters, digits, '-', '_', '.'); name your Kueue "
            f"LocalQueue, e.g. {DEFAULT_QUEUE}")


def container_name(value: str) -> str | None:
    if is_dns1123_label(value):
        return None
    return "a container name is an RFC 1123 label (a-z, 0-9, '-'), e.g. jax-tpu"


def service_account(value: str) -> str | None:
    if is_dns1123_subdomain(value):
        return None
    return "a ServiceAccount name is a DNS-1123 subdomain (a-z, 0-9, '-', '.'), e.g. xpk-sa or default"


def gcs_location(value: str) -> str | None:
    if value.startswith("gs://") and not any(c.isspace() for c in value):
        return None
    return f"must be a gs:// URL with no spaces, e.g. {DEFAULT_GCS_LOCATION}"


def image(value: str) -> str | None:
    problem = image_problem(value)
    if problem is None:
        return None
    return (f"{problem}; e.g. gcr.io/my-project/my-image:tag (the kubelet would refuse it as "
            "InvalidImageName)")


CHECKS: dict[str, Callable[[str], str | None]] = {
    "workload_name": workload_name, "queue_name": queue_name, "container_name": container_name,
    "gcs_location": gcs_location, "image": image, "service_account": service_account,
}

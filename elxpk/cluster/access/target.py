"""Which cluster a command talks to. Pure data: resolving it into an API client is cluster/access/connect.py."""

from __future__ import annotations

from typing import NamedTuple

from elxpk.k8s_names import is_dns1123_label

DEFAULT_NAMESPACE = "default"  # Kubernetes' own; where --namespace, ELXPK_NAMESPACE and the config are silent


class ClusterTarget(NamedTuple):
    """Cluster selection shared by every `workload` verb.

    Either GKE (`project` + `location` + `cluster`: endpoint and CA from the Container API, token
    from google.auth) or a kubeconfig (`kubeconfig` and/or `context`, or `default_kubeconfig`), never both.
    """

    project: str | None = None
    location: str | None = None  # a zone (us-central2-b) or a region (us-central2)
    cluster: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    # Nothing named a cluster: use the default kubeconfig (each KUBECONFIG entry, else ~/.kube/config).
    default_kubeconfig: bool = False


def namespace_problem(namespace: str, flag: str = "--namespace") -> str | None:
    """The one check of a namespace name, for every verb (`workload create` included): one line naming `flag`
    (as the command was spelled: gcluster's --gke-namespace), or None."""
    if is_dns1123_label(namespace or ""):  # ValidateNamespaceName
        return None
    return (f"{flag} {namespace!r} is not a valid namespace name: use lowercase letters, digits and '-', "
            "at most 63 characters")

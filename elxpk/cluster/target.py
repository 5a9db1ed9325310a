"""Which cluster a command talks to. Pure data: resolving it into an API client is cluster/connect.py."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClusterTarget:
    """Cluster selection shared by every `workload` verb.

    Either GKE (`project` + `location` + `cluster`: endpoint and CA from the Container API, token
    from google.auth) or a kubeconfig (`kubeconfig` and/or `context`), never both.
    """

    project: str | None = None
    location: str | None = None  # a zone (us-central2-b) or a region (us-central2)
    cluster: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str = "default"

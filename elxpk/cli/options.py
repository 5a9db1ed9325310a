"""Typer option types shared by several commands (cluster selection, output format).

Every `workload` verb takes the same cluster-selection flags; they resolve into one ClusterTarget.
"""

from __future__ import annotations

from typing import Annotated

import typer

from elxpk.cluster.target import ClusterTarget

Project = Annotated[
    str | None, typer.Option("--project", help="GCP project of the GKE cluster \\[env ELXPK_PROJECT].")
]
Zone = Annotated[str | None, typer.Option("--zone", help="Zone of a zonal GKE cluster \\[env ELXPK_ZONE].")]
Region = Annotated[
    str | None, typer.Option("--region", help="Region of a regional GKE cluster \\[env ELXPK_REGION].")
]
Cluster = Annotated[str | None, typer.Option("--cluster", help="GKE cluster name \\[env ELXPK_CLUSTER].")]
Kubeconfig = Annotated[
    str | None,
    typer.Option("--kubeconfig", help="Use this kubeconfig instead of GKE lookup (read only, never written)."),
]
Context = Annotated[str | None, typer.Option("--context", help="kubeconfig context to use.")]
Namespace = Annotated[str, typer.Option("--namespace", "-n", help="Kubernetes namespace.")]
Output = Annotated[str, typer.Option("--output", "-o", help="Output format: table, json or yaml.")]


def cluster_target(
    project: str | None,
    zone: str | None,
    region: str | None,
    cluster: str | None,
    kubeconfig: str | None,
    context: str | None,
    namespace: str = "default",
) -> ClusterTarget:
    """The cluster flags as given. ELXPK_* variables and the config file fill the gaps later, in one
    place: elxpk.cluster.defaults.resolve_target."""
    return ClusterTarget(
        project=project,
        location=zone or region,
        cluster=cluster,
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
    )

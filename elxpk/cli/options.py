"""Typer option types shared by several commands (cluster selection, output format).

Every `workload` verb takes the same cluster-selection flags; they resolve into one ClusterTarget.
"""

from __future__ import annotations

import os
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
    """Flags first, then ELXPK_* environment variables. Config-file defaults are applied in cluster/."""
    env = os.environ
    return ClusterTarget(
        project=project or env.get("ELXPK_PROJECT"),
        location=zone or region or env.get("ELXPK_ZONE") or env.get("ELXPK_REGION"),
        cluster=cluster or env.get("ELXPK_CLUSTER"),
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
    )

"""Cluster-selection defaults and their validation, before any I/O.

Precedence (all applied by resolve_target): flags, then ELXPK_* environment variables, then the
config file `$ELXPK_CONFIG` or `~/.config/elxpk/config.yaml`:

    project: my-proj
    zone: us-central2-b        # or region:
    cluster: my-cluster
    namespace: team-a
    # or, for a cluster that is not GKE:
    kubeconfig: ~/clusters/dev.yaml
    context: dev
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from elxpk.bounded_read import CONFIG_BYTES, ReadRefused, decode_text, read_limited
from elxpk.cluster.access.target import ClusterTarget, namespace_problem
from elxpk.errors import UsageError

_KEYS = {"project", "zone", "region", "location", "cluster", "namespace", "kubeconfig", "context"}
# The ELXPK_* variables the launcher reads (the trainer's settings are elxpk_contract's). Set to nothing or
# to spaces, each is refused rather than read as unset: `ELXPK_CLUSTER= elxpk ...` means something else.
ENV_NAMES = ("ELXPK_PROJECT", "ELXPK_ZONE", "ELXPK_REGION", "ELXPK_CLUSTER", "ELXPK_NAMESPACE", "ELXPK_CONFIG",
             "ELXPK_CONTAINER_API_ENDPOINT")


def env_value(environ: Mapping[str, str], name: str) -> str | None:
    """ELXPK_* `name` from the environment: None when unset, UsageError (exit 2) when set but blank."""
    value = environ.get(name)
    if value is not None and not value.strip():
        raise UsageError(f"{name} is set but empty; unset it or give it a value")
    return value


def check_env(environ: Mapping[str, str] = os.environ) -> None:
    problems = []
    for name in ENV_NAMES:
        try:
            env_value(environ, name)
        except UsageError as exc:
            problems.extend(exc.messages)
    if problems:
        raise UsageError(*problems)


def config_path(environ: Mapping[str, str] = os.environ) -> Path:
    explicit = env_value(environ, "ELXPK_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = Path(environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "elxpk" / "config.yaml"


def load_config(path: Path, *, required: bool = False) -> dict[str, str]:
    """The config file's keys; {} when it does not exist, unless `required` (ELXPK_CONFIG names it: a
    missing file then is an error, never a silent fall-back to other defaults)."""
    import yaml


    where = f"ELXPK_CONFIG {path}" if required else f"config file {path}"
    try:
        text = decode_text(read_limited(path, limit=CONFIG_BYTES), "YAML")
    except FileNotFoundError:
        if required:
            raise UsageError(f"{where}: no such file; create it or unset ELXPK_CONFIG") from None
        return {}
    except ReadRefused as exc:
        raise UsageError(f"{where}: {exc}; fix or remove it") from None
    try:
        data = yaml.safe_load(text) or {}
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        raise UsageError(f"{where}: not valid YAML ({exc.__class__.__name__}): fix or remove it") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: expected a mapping of keys ({', '.join(sorted(_KEYS))})")
    unknown = sorted(str(k) for k in set(data) - _KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)}; "
                         f"known keys: {', '.join(sorted(_KEYS))}")
    values = {}
    for key, value in data.items():
        if value is None:
            continue
        try:
            text = "" if isinstance(value, (dict, list, bool)) else str(value)
        except ValueError:  # an integer of thousands of digits
            text = ""
        if not text.strip():
            raise UsageError(f"{where}: {key} must be a non-empty name or path, not a {type(value).__name__}")
        values[key] = text
    return values


def resolve_target(target: ClusterTarget, *, namespace_given: bool = True, require_cluster: bool = True,
                   environ: Mapping[str, str] = os.environ) -> ClusterTarget:
    """Fill unset fields from the config file and check the selection is complete; UsageError otherwise.

    A kubeconfig or context (from flags or the file) selects a non-GKE cluster and wins over GKE defaults.
    `require_cluster=False` (a client-side dry run: nothing is sent) fills the same fields, the namespace
    included, but does not ask for a complete selection.
    """
    check_env(environ)
    cfg = load_config(config_path(environ), required=bool(environ.get("ELXPK_CONFIG")))
    namespace = target.namespace
    if not namespace_given:
        namespace = environ.get("ELXPK_NAMESPACE") or cfg.get("namespace") or target.namespace
    kubeconfig = target.kubeconfig
    context = target.context
    if kubeconfig or context:
        return target._replace(project=None, location=None, cluster=None, namespace=namespace)
    project = target.project or environ.get("ELXPK_PROJECT") or cfg.get("project")
    location = (target.location or environ.get("ELXPK_ZONE") or environ.get("ELXPK_REGION")
                or cfg.get("zone") or cfg.get("region") or cfg.get("location"))
    cluster = target.cluster or environ.get("ELXPK_CLUSTER") or cfg.get("cluster")
    if not (project or cluster) and (cfg.get("kubeconfig") or cfg.get("context")):
        return target._replace(kubeconfig=cfg.get("kubeconfig"), context=cfg.get("context"),
                                   namespace=namespace)
    if project or location or cluster:
        missing = [flag for flag, value in (("--project", project), ("--zone or --region", location),
                                            ("--cluster", cluster)) if not value]
        if missing and require_cluster:
            raise UsageError(*(f"{flag} is required to reach a GKE cluster (or give --kubeconfig/--context "
                               "for another cluster)" for flag in missing))
        return target._replace(project=project, location=location, cluster=cluster,
                                   namespace=namespace)
    # Nothing chosen: the default kubeconfig is used read-only, if there is one: every entry of a KUBECONFIG
    # that is set (connect checks each, and names KUBECONFIG when one is missing, a FIFO or a directory),
    # else ~/.kube/config when something is there (lexists: a FIFO or a dangling link is refused, not skipped).
    listed = [p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p.strip()]
    missing = [p for p in listed if not os.path.lexists(os.path.expanduser(p))]
    if missing and require_cluster:  # reported with the other selection problems, before anything is read
        raise UsageError(*(f"KUBECONFIG {p}: no such file; fix KUBECONFIG, or unset it to use ~/.kube/config"
                           for p in missing))
    if listed or os.path.lexists(Path.home() / ".kube" / "config"):
        return target._replace(default_kubeconfig=True, namespace=namespace)
    if not require_cluster:
        return target._replace(namespace=namespace)
    raise UsageError("no cluster selected: give --project, --zone/--region and --cluster for GKE, or --kubeconfig "
                     f"(and --context) for another cluster; defaults can live in {config_path(environ)}")


def validate_namespace(namespace: str) -> None:
    problem = namespace_problem(namespace)
    if problem:
        raise UsageError(problem)

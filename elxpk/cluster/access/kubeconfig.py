"""Read a kubeconfig and everything it names, bounded, into one self-contained config for the kubernetes library.

The library opens every file a kubeconfig names with a plain `open().read()` (a `tokenFile` on a FIFO
blocks forever, on /dev/zero it reads until memory runs out) and runs exec plugins unbounded. So elxpk
picks the context itself and hands the library a config of that one context in which:

- each file the selected cluster and user name (`certificate-authority`, `client-certificate`,
  `client-key`, `tokenFile`) went through the bounded reader and is inlined as data;
- an exec plugin was run by elxpk/cluster/access/exec_credential.py, and is replaced by what it printed;
- `server` and `proxy-url` are checked URLs (a server without a scheme gets one, as kubectl gives it).

Which files: `--kubeconfig` (or the config file's `kubeconfig`) names one; otherwise every entry of
`KUBECONFIG` (a list, as kubectl reads it), else ~/.kube/config. Every file gets the same checks, and a
refusal names where the path came from. Entries of a KUBECONFIG list merge as kubectl merges them: the
first file that names a cluster, user or context wins, and so does the first `current-context`.
"""

from __future__ import annotations

import base64
import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from elxpk.bounded_read import KUBECONFIG_BYTES, KUBECONFIG_VALUES, read_input, yaml_values_problem
from elxpk.cluster.access.exec_credential import ExecPlugin, exec_plugin, header_problem
from elxpk.errors import UsageError

KUBECONFIG_FILES = 16  # entries of a KUBECONFIG list: each is read whole (at most 1 MiB)
NAMED_FILE_BYTES = 1024 * 1024  # a CA bundle, a client certificate or key, a token: a few KiB
# The file a field names, and the field its content goes to (base64 for certificates, as kubectl's *-data).
CLUSTER_FILES = {"certificate-authority": "certificate-authority-data"}
USER_FILES = {"client-certificate": "client-certificate-data", "client-key": "client-key-data"}
_SOCKS = ("socks5", "socks5h", "socks4", "socks4a")  # what the kubernetes library hands to urllib3's SOCKS support


class KubeconfigFile(NamedTuple):
    path: str
    label: str  # how the user named it: '--kubeconfig', 'KUBECONFIG', 'kubeconfig' (the ~/.kube/config default)


class Selected(NamedTuple):
    """One context, ready for `load_kube_config_from_dict`, and the exec plugin that gave its credential."""

    config: dict[str, Any]
    context: str
    shown: str  # the kubeconfig as messages name it
    plugin: ExecPlugin | None


def kubeconfig_files(given: str | None, environ: Mapping[str, str] = os.environ) -> list[KubeconfigFile]:
    """The files to read: `given` (--kubeconfig), else each KUBECONFIG entry, else ~/.kube/config."""
    if given:
        return [KubeconfigFile(os.path.expanduser(given), "--kubeconfig")]
    listed = [p for p in (environ.get("KUBECONFIG") or "").split(os.pathsep) if p.strip()]
    if len(listed) > KUBECONFIG_FILES:
        raise UsageError(f"KUBECONFIG: lists {len(listed)} files, over the {KUBECONFIG_FILES} elxpk merges; "
                         "name the one to use with --kubeconfig")
    if listed:
        return [KubeconfigFile(os.path.expanduser(p), "KUBECONFIG") for p in dict.fromkeys(listed)]
    return [KubeconfigFile(str(Path.home() / ".kube" / "config"), "kubeconfig")]


def read_kubeconfig(path: str, label: str = "--kubeconfig") -> dict[str, Any]:
    """The kubeconfig at `path`: a bounded, regular, UTF-8 YAML file whose top level is a mapping and whose
    clusters, users and contexts are lists of mappings; UsageError (exit 2, naming `label`) otherwise."""
    import yaml

    text = str(read_input(path, flag=label, limit=KUBECONFIG_BYTES))
    too_many = yaml_values_problem(text, limit=KUBECONFIG_VALUES)
    if too_many:
        raise UsageError(f"{label} {path}: {too_many} for a kubeconfig; check what produced it")
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{label} {path}: not valid YAML{where}; fix the file") from None
    except (RecursionError, ValueError):  # ValueError: a constructor's own, e.g. an integer of 5,000 digits
        raise UsageError(f"{label} {path}: nested too deeply or holding a value YAML cannot read; fix the "
                         "file") from None
    if not isinstance(data, dict):
        raise UsageError(f"{label} {path}: not a kubeconfig (its top level is not a mapping of clusters, users "
                         "and contexts)")
    for key in ("clusters", "users", "contexts"):
        entries = data.get(key)
        if entries is not None and (not isinstance(entries, list)
                                    or not all(isinstance(e, dict) for e in entries)):
            raise UsageError(f"{label} {path}: {key} must be a list of named entries")
    return data


def select(files: list[KubeconfigFile], context: str | None) -> Selected:
    """Read `files`, pick `context` (else the current one) and resolve what its cluster and user name."""
    merged: dict[str, dict[str, tuple[dict[str, Any], KubeconfigFile]]] = {"clusters": {}, "users": {},
                                                                           "contexts": {}}
    current: str | None = None
    for source in files:
        data = read_kubeconfig(source.path, source.label)
        for key, named in merged.items():
            for entry in data.get(key) or []:
                name = entry.get("name")
                if isinstance(name, str):
                    named.setdefault(name, (entry, source))
        if current is None and isinstance(data.get("current-context"), str) and data["current-context"]:
            current = data["current-context"]
    shown = (f"{files[0].label} {files[0].path}" if len(files) == 1
             else f"KUBECONFIG {os.pathsep.join(f.path for f in files)}")
    name = context or current
    if not name:
        raise UsageError(f"{shown}: no current-context is set; give --context")
    if name not in merged["contexts"] and context:
        raise UsageError(f"--context {name!r}: not found in {shown}; give one of its contexts")
    if name not in merged["contexts"]:
        raise UsageError(f"{shown}: current-context {name!r} is not one of its contexts; fix the kubeconfig "
                         "or give --context")
    ctx_entry, _ = merged["contexts"][name]
    ctx = ctx_entry.get("context")
    if not isinstance(ctx, dict) or not isinstance(ctx.get("cluster"), str):
        raise UsageError(f"{shown}: context {name!r} names no cluster; fix the kubeconfig")
    if ctx["cluster"] not in merged["clusters"]:
        raise UsageError(f"{shown}: cluster {ctx['cluster']!r} of context {name!r} not found; fix the kubeconfig")
    cluster_entry, cluster_file = merged["clusters"][ctx["cluster"]]
    cluster_where = f"{cluster_file.label} {cluster_file.path}: cluster {ctx['cluster']!r}"
    cluster = _cluster(cluster_entry.get("cluster"), cluster_where, cluster_file.path)
    user_name = ctx.get("user")
    if isinstance(user_name, str) and user_name and user_name not in merged["users"]:
        # client-go's validation refuses it too: the verbs would otherwise go out with no credentials at all
        raise UsageError(f"{shown}: user {user_name!r} of context {name!r} not found; fix the kubeconfig")
    user_entry, user_file = merged["users"].get(user_name, ({}, cluster_file)) if isinstance(user_name, str) \
        else ({}, cluster_file)
    raw_user = user_entry.get("user")
    client_cert = isinstance(raw_user, dict) and any(k in raw_user for k in (*USER_FILES, *USER_FILES.values()))
    server_tls = any(k in cluster for k in ("certificate-authority-data", "insecure-skip-tls-verify")) or client_cert
    cluster["server"] = _server(cluster.get("server"), cluster_where, bool(server_tls))
    user, plugin = _user(raw_user, f"{user_file.label} {user_file.path}: user {user_name!r}", user_file.path,
                         cluster)
    config = {"apiVersion": "v1", "kind": "Config", "current-context": name,
              "contexts": [{"name": name, "context": {**ctx, "cluster": "c", "user": "u"}}],
              "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": user}]}
    return Selected(config, name, shown, plugin)


def _inline(entry: dict[str, Any], files: Mapping[str, str], where: str, kubeconfig: str, *, encode: bool) -> None:
    """Replace each file field of `entry` by its content, read bounded (kubectl: the data field wins when
    both are set, and the file is then not read)."""
    for field, data_field in files.items():
        path = entry.pop(field, None)
        if path is None or data_field in entry:
            continue
        if not isinstance(path, str) or not path.strip() or any(ord(c) < 32 for c in path):
            raise UsageError(f"{where}: {field} {str(path)[:120]!r} is not a file path; fix the kubeconfig")
        full = os.path.join(os.path.dirname(os.path.abspath(kubeconfig)), os.path.expanduser(path))
        content = read_input(full, flag=f"{where}: {field}", limit=NAMED_FILE_BYTES)
        entry[data_field] = base64.b64encode(str(content).encode()).decode() if encode else str(content).strip()


def _cluster(raw: Any, where: str, kubeconfig: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: its cluster must be a mapping with a server")
    cluster = dict(raw)
    _inline(cluster, CLUSTER_FILES, where, kubeconfig, encode=True)
    if cluster.get("insecure-skip-tls-verify") is True and "certificate-authority-data" in cluster:
        # kubectl: "specifying a root certificates file with the insecure flag is not allowed"
        raise UsageError(f"{where}: insecure-skip-tls-verify with a certificate-authority: give one of them, "
                         "not both (the CA is the one to keep)")
    proxy = cluster.get("proxy-url")
    if proxy is not None:
        problem = proxy_problem(proxy)
        if problem:
            raise UsageError(f"{where}: proxy-url {str(proxy)[:120]!r}: {problem}")
    return cluster


def _user(raw: Any, where: str, kubeconfig: str, cluster: dict[str, Any]) -> tuple[dict[str, Any], ExecPlugin | None]:
    if raw is None:
        return {}, None
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: its user must be a mapping")
    user = dict(raw)
    _inline(user, USER_FILES, where, kubeconfig, encode=True)
    _inline(user, {"tokenFile": "token"}, where, kubeconfig, encode=False)
    for field in ("token", "username", "password"):  # each goes into an Authorization header as it is
        if isinstance(user.get(field), str):
            problem = header_problem(user[field], field)
            if problem:
                raise UsageError(f"{where}: {problem}; fix the kubeconfig")
    provider = user.get("auth-provider")
    if provider is not None:
        # The library's gcp provider runs `cmd-path` or google.auth unbounded, and its oidc refresh is an
        # unbounded request; kubectl itself dropped gcp and azure in 1.26.
        raise UsageError(f"{where}: auth-provider {str((provider or {}).get('name') if isinstance(provider, dict) else provider)[:40]!r} "
                         "is not supported; use an exec credential plugin (gke-gcloud-auth-plugin for GKE, "
                         "kubelogin for OIDC)")
    plugin = None
    if "exec" in user and not user.get("token"):  # kubectl and the library: a token wins over exec
        info: dict[str, Any] = {k: cluster[k] for k in ("server", "certificate-authority-data", "tls-server-name",
                                         "insecure-skip-tls-verify", "proxy-url") if k in cluster}
        plugin = exec_plugin(user["exec"], where=where, base_dir=os.path.dirname(os.path.abspath(kubeconfig)),
                             cluster_info=info)
    user.pop("exec", None)
    return user, plugin


def proxy_problem(proxy: Any) -> str | None:
    """Why a proxy-url cannot be used, in words, or None."""
    if not isinstance(proxy, str) or not proxy.strip():
        return "must be a URL such as http://proxy.example:3128"
    try:
        parts = urlsplit(proxy)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        return "not a valid URL; give one such as http://proxy.example:3128"
    scheme = parts.scheme.lower()
    if scheme in _SOCKS and importlib.util.find_spec("socks") is None:
        return "a SOCKS proxy needs the PySocks package (pip install pysocks); or use an http(s) proxy"
    if scheme not in ("http", "https", *_SOCKS):
        return "elxpk supports http, https and socks5 proxies; give one such as http://proxy.example:3128"
    if not parts.hostname:
        return "names no host; give one such as http://proxy.example:3128"
    return None


def _server(server: Any, where: str, tls: bool) -> str:
    """The cluster's `server` as a URL. Like client-go's DefaultServerURL, a server without a scheme (host:port,
    which urlsplit reads as scheme 'host') gets https:// when the cluster has TLS settings, else http://."""
    if not isinstance(server, str) or not server.strip():
        raise UsageError(f"{where}: server is missing; give the API server's URL, such as https://host:6443")
    if any(c.isspace() or ord(c) < 32 for c in server):
        raise UsageError(f"{where}: server {server[:120]!r} holds a space or control character; fix the URL")
    try:
        parts = urlsplit(server)
        if "://" not in server and (not parts.scheme or not parts.netloc):
            server = ("https://" if tls else "http://") + server
            parts = urlsplit(server)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        raise UsageError(f"{where}: server {server[:120]!r} is not a valid URL; give one such as "
                         "https://host:6443") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{where}: server {server[:120]!r} is not an http(s) URL with a host; give one such "
                         "as https://host:6443")
    return server.rstrip("/")

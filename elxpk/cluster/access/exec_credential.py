"""Run a kubeconfig's exec credential plugin (`users[].user.exec`) with a time bound and an output cap.

The kubernetes library runs the plugin itself with `communicate()`: a plugin that hangs blocks every verb
forever, and one that prints gigabytes is buffered whole. elxpk runs it here instead and hands the library
only what it produced (a token, or a client certificate and key), so the library never starts a program.

Bounds: EXEC_TIMEOUT_S for the whole run (gke-gcloud-auth-plugin answers in about a second; a plugin that
waits for a browser or a prompt cannot be answered, elxpk gives it no terminal), EXEC_OUTPUT_BYTES on stdout
(an ExecCredential is a token or a certificate pair: a few KiB) and on stderr. A plugin over either is
killed with its whole process group, so a child it started (`yes`) goes too.

What a failure is: a plugin that is not there, not executable, or answers with something that is not an
ExecCredential is the kubeconfig's fault (UsageError, exit 2), and so is one that exits non-zero (not
logged in, a wrong argument: running it by hand shows why); one that does not finish in time is
ClusterError (exit 1): the identity provider it talks to may be down, and a rerun may pass.
"""

from __future__ import annotations

import datetime
import json
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from elxpk.bounded_read import KIB, size_text
from elxpk.errors import ClusterError, UsageError

EXEC_TIMEOUT_S = 30.0
EXEC_OUTPUT_BYTES = 256 * KIB
# client-go's: v1alpha1 was removed in Kubernetes 1.24.
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
# Re-run the plugin this long before its credential expires (the kubernetes library's own skew).
EXPIRY_SKEW_S = 10.0


class ExecPlugin(NamedTuple):
    """A checked exec entry: what to run, and how its failures are named."""

    where: str  # 'KUBECONFIG /path: user "u"' - the kubeconfig and the user entry
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    api_version: str
    cluster_info: dict[str, Any] | None  # spec.cluster when provideClusterInfo is set


class Credential(NamedTuple):
    token: str | None
    client_certificate: str | None  # PEM
    client_key: str | None  # PEM
    expires: float | None  # a time.time() value, None when the plugin gave none


def exec_plugin(entry: Any, *, where: str, base_dir: str, cluster_info: dict[str, Any]) -> ExecPlugin:
    """`user.exec` checked, with its command found; UsageError (one line naming `where`) otherwise."""
    field = f"{where}: exec"
    if not isinstance(entry, dict):
        raise UsageError(f"{field}: must be a mapping with command and apiVersion")
    command, api_version = entry.get("command"), entry.get("apiVersion")
    if not isinstance(command, str) or not command.strip() or any(ord(c) < 32 for c in command):
        raise UsageError(f"{field}: command is missing or not a program's name; name the credential plugin "
                         "to run")
    if api_version not in EXEC_API_VERSIONS:
        raise UsageError(f"{field}: apiVersion {api_version!r} is not one of {', '.join(EXEC_API_VERSIONS)}")
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise UsageError(f"{field}: args must be a list of strings")
    env = entry.get("env") or []
    if not isinstance(env, list) or not all(isinstance(e, dict) and isinstance(e.get("name"), str)
                                            and isinstance(e.get("value"), str) for e in env):
        raise UsageError(f"{field}: env must be a list of {{name, value}} strings")
    if entry.get("interactiveMode") == "Always":
        raise UsageError(f"{field}: {command} asks for a terminal (interactiveMode: Always), and elxpk runs it "
                         "without one; log in with it first, or set interactiveMode: IfAvailable")
    program = _find(command, base_dir, field)
    return ExecPlugin(where, (program, *args), tuple((e["name"], e["value"]) for e in env), api_version,
                      cluster_info if entry.get("provideClusterInfo") is True else None)


def _find(command: str, base_dir: str, field: str) -> str:
    """The program's path. client-go resolves a command with a path separator against the kubeconfig's
    directory, and looks up a bare name on PATH."""
    if os.sep in command:
        path = os.path.join(base_dir, os.path.expanduser(command))
        if not os.path.exists(path):
            raise UsageError(f"{field}: command {command}: no such file; install the plugin or fix the path")
    else:
        found = shutil.which(command)
        if found is None:
            raise UsageError(f"{field}: command {command}: not found on PATH; install the plugin or give its "
                             "path")
        path = found
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise UsageError(f"{field}: command {command}: not an executable file; fix the path or its mode")
    return path


def run_plugin(plugin: ExecPlugin, *, timeout_s: float = EXEC_TIMEOUT_S, limit: int = EXEC_OUTPUT_BYTES,
               environ: Mapping[str, str] = os.environ, clock: Callable[[], float] = time.monotonic,
               ) -> Credential:
    """The credential the plugin prints, within `timeout_s` and `limit` bytes per stream."""
    name = f"{plugin.where}: exec plugin {plugin.argv[0]}"
    request: dict[str, Any] = {"interactive": False}
    if plugin.cluster_info is not None:
        request["cluster"] = plugin.cluster_info
    env = {**environ, **dict(plugin.env), "KUBERNETES_EXEC_INFO": json.dumps(
        {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": request})}
    try:
        # start_new_session: the plugin leads its own group, so a kill reaches what it started too.
        process = subprocess.Popen(plugin.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=env, start_new_session=True)
    except (OSError, ValueError) as exc:  # not a program the kernel runs (no #! line); a NUL in args or env
        raise UsageError(f"{name}: cannot be started ({getattr(exc, 'strerror', None) or exc}); fix the "
                         "kubeconfig's exec entry") from None
    try:
        out, err, problem = _collect(process, timeout_s, limit, clock)
    finally:
        _kill_group(process)
    if problem == "timeout":
        raise ClusterError(f"{name}: timed out after {timeout_s:g} s{_lingered(out, plugin.api_version, name)}; "
                           "run it by hand to see why")
    if problem is not None:
        raise UsageError(f"{name}: printed more than {size_text(limit)} on {problem}, more than any "
                         "credential; is it a credential plugin?")
    if process.returncode != 0:
        last = next((line.strip() for line in reversed(err.decode("utf-8", "replace").splitlines())
                     if line.strip()), "")
        how = (f"was killed by signal {-process.returncode}" if process.returncode < 0
               else f"exited {process.returncode}")
        raise UsageError(f"{name}: {how}" + (f": {last[:300]}" if last else "") + "; run it by hand to see why")
    return _credential(out, plugin.api_version, name)


def _collect(process: subprocess.Popen[bytes], timeout_s: float, limit: int, clock: Callable[[], float],
             ) -> tuple[bytes, bytes, str | None]:
    """stdout and stderr until both end and the process exits; the third value names what stopped it early
    ('timeout', 'stdout', 'stderr') or is None."""
    assert process.stdout is not None and process.stderr is not None
    deadline = clock() + timeout_s
    got = {"stdout": bytearray(), "stderr": bytearray()}
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ, "stdout")
        selector.register(process.stderr, selectors.EVENT_READ, "stderr")
        while selector.get_map():
            left = deadline - clock()
            if left <= 0:
                return bytes(got["stdout"]), bytes(got["stderr"]), "timeout"
            for key, _ in selector.select(min(left, 1.0)):
                chunk = os.read(key.fd, 64 * KIB)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                got[key.data] += chunk
                if len(got[key.data]) > limit:
                    return bytes(got["stdout"]), bytes(got["stderr"]), key.data
    try:
        process.wait(timeout=max(0.0, deadline - clock()))
    except subprocess.TimeoutExpired:  # closed its pipes but did not exit
        return bytes(got["stdout"]), bytes(got["stderr"]), "timeout"
    return bytes(got["stdout"]), bytes(got["stderr"]), None


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    if process.returncode is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def _lingered(out: bytes, api_version: str, name: str) -> str:
    """Words for a plugin that printed its credential and then did not end (a daemon it started holds its
    stdout open): kubectl waits for the exit too, and the output of a process still running may not be all."""
    try:
        _credential(out, api_version, name)
    except UsageError:
        return ""
    return (" after printing a credential: it did not exit, or a process it started still holds its stdout "
            "open")


def header_problem(value: str, what: str) -> str | None:
    """Why `value` cannot be sent in an HTTP header (the token as `Authorization: Bearer ...`), or None: http.client
    refuses a line break and encodes headers as Latin-1, each a failure deep in a request otherwise."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return f"the {what} holds a line break or control character"
    if any(ord(c) > 126 for c in value):
        return f"the {what} holds a character that is not ASCII, which no HTTP header carries"
    return None


def _credential(out: bytes, api_version: str, name: str) -> Credential:
    def bad(why: str) -> UsageError:
        return UsageError(f"{name}: printed no valid ExecCredential ({why}); run it by hand to see what it "
                          "prints")

    try:
        data = json.loads(out.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise bad("not JSON") from None
    if not isinstance(data, dict) or data.get("kind") != "ExecCredential":
        raise bad("no kind: ExecCredential")
    if data.get("apiVersion") != api_version:
        raise bad(f"apiVersion {str(data.get('apiVersion'))[:80]!r}, where the kubeconfig asks for {api_version}")
    status = data.get("status")
    if not isinstance(status, dict):
        raise bad("no status")
    token, cert, key = status.get("token"), status.get("clientCertificateData"), status.get("clientKeyData")
    if not ((isinstance(token, str) and token) or (isinstance(cert, str) and cert and isinstance(key, str) and key)):
        raise bad("status holds neither a token nor clientCertificateData with clientKeyData")
    expires = None
    stamp = status.get("expirationTimestamp")
    if stamp is not None:
        try:
            moment = datetime.datetime.fromisoformat(str(stamp))
            if moment.tzinfo is None:
                raise ValueError(stamp)
            expires = moment.timestamp()
        except ValueError:
            raise bad(f"expirationTimestamp {str(stamp)[:80]!r} is not an RFC 3339 time") from None
    if isinstance(token, str) and token:
        problem = header_problem(token, "token")
        if problem:
            raise bad(problem)
        return Credential(token, None, None, expires)
    return Credential(None, str(cert), str(key), expires)

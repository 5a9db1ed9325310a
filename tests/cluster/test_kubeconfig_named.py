"""What a kubeconfig names is bounded (issue #29, class 2): the files it names go through the bounded reader
and are refused by their kind, its exec plugin runs with a time bound and an output cap, its proxy-url and
server are checked, and KUBECONFIG gets the checks --kubeconfig gets. In process, against real files, real
plugin processes and the fake API server on 127.0.0.1; the console-script runs are in
tests/process/test_kubeconfig_named.py."""

from __future__ import annotations

import contextlib
import io
import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk.cli.main import run_guarded
from elxpk.cluster.access.connect import connect
from elxpk.cluster.access.exec_credential import EXEC_OUTPUT_BYTES, run_plugin
from elxpk.cluster.access.kubeconfig import kubeconfig_files, select
from elxpk.cluster.access.target import ClusterTarget
from elxpk.errors import ClusterError, UsageError
from tests.cluster.kubeconfig_shapes import EXEC_API, kubeconfig, plugins, special_files, write

FILE_FIELDS = [("cluster", "certificate-authority"), ("user", "client-certificate"), ("user", "client-key"),
               ("user", "tokenFile")]


def _refusal(path: Path, *, environ: dict | None = None) -> str:
    with pytest.raises(UsageError) as info:
        connect(ClusterTarget(kubeconfig=str(path)), resolved=True, environ=environ or {})
    [line] = info.value.messages
    return line


def _with_file(field: tuple[str, str], value: str, server: str = "https://127.0.0.1:1") -> dict:
    part, name = field
    user = {name: value} if part == "user" else {"token": "t"}
    return kubeconfig(server, cluster={name: value} if part == "cluster" else None, user=user)


@pytest.mark.parametrize("field", FILE_FIELDS, ids=[f[1] for f in FILE_FIELDS])
def test_every_named_file_is_refused_by_its_kind(tmp_path, field):
    for path, kind in special_files(tmp_path / "special").items():
        started = time.monotonic()
        line = _refusal(write(tmp_path / "k.yaml", _with_file(field, path)))
        assert time.monotonic() - started < 20, line  # a FIFO with no writer must not block the read
        assert f"cluster 'c': {field[1]}" in line or f"user 'u': {field[1]}" in line, line
        assert path in line and kind in line and "k.yaml" in line, line


def test_named_files_are_read_relative_to_the_kubeconfig_and_inlined(fake, tmp_path):
    (tmp_path / "token").write_text("test-token\n")  # kubectl trims the token file
    write(tmp_path / "k.yaml", kubeconfig(fake.url, user={"tokenFile": "token"}))
    kube = connect(ClusterTarget(kubeconfig=str(tmp_path / "k.yaml")), resolved=True, environ={})
    assert kube.jobset_crd_served()
    assert fake.seen_tokens[-1] == "test-token"


def test_a_file_over_its_cap_is_refused(tmp_path):
    big = tmp_path / "big.pem"
    with open(big, "wb") as handle:
        handle.truncate(50 * 1024 * 1024)
    line = _refusal(write(tmp_path / "k.yaml", _with_file(("cluster", "certificate-authority"), str(big))))
    assert "certificate-authority" in line and "over the 1.0 MiB" in line


@pytest.mark.parametrize(("proxy", "says"), [
    ("socks5://127.0.0.1:1080", "PySocks"), ("::::", "proxy-url"), ("ftp://proxy:21", "supports http"),
    ("http://", "names no host"), ("http://p:99999", "not a valid URL"), (7, "must be a URL"),
])
def test_an_unusable_proxy_url_is_refused_when_read(tmp_path, proxy, says):
    line = _refusal(write(tmp_path / "k.yaml", kubeconfig(cluster={"proxy-url": proxy})))
    assert "proxy-url" in line and says in line and "cluster 'c'" in line, line


def test_a_good_proxy_url_is_handed_to_the_client(tmp_path):
    path = write(tmp_path / "k.yaml", kubeconfig(cluster={"proxy-url": "http://127.0.0.1:3128"}))
    assert connect(ClusterTarget(kubeconfig=str(path)), resolved=True, environ={}).host == "http://127.0.0.1:1"


@pytest.mark.parametrize(("server", "tls", "host"), [
    ("127.0.0.1:6443", False, "http://127.0.0.1:6443"), ("localhost:6443", True, "https://localhost:6443"),
    ("https://h:6443/", False, "https://h:6443"),
])
def test_a_server_without_a_scheme_gets_kubectls(tmp_path, server, tls, host):
    cluster = {"insecure-skip-tls-verify": True} if tls else None
    path = write(tmp_path / "k.yaml", kubeconfig(server, cluster=cluster))
    assert connect(ClusterTarget(kubeconfig=str(path)), resolved=True, environ={}).host == host


@pytest.mark.parametrize("server", ["", None, 5, "ftp://h:1", "http://h:99999", "http://", "https://h :1"])
def test_a_server_that_is_no_url_is_refused_naming_the_cluster_entry(tmp_path, server):
    line = _refusal(write(tmp_path / "k.yaml", kubeconfig(server)))
    assert "cluster 'c': server" in line, line


# --- exec credential plugins ----------------------------------------------------------------------------------


def _exec(command: str, **extra) -> dict:
    return {"exec": {"apiVersion": EXEC_API, "command": command, **extra}}


@pytest.mark.parametrize(("name", "says"), [
    ("hang", r"user 'u': exec plugin .*hang.sh: timed out after 1 s; run it"),
    # the fifth pass: it printed its credential, then did not end (itself, or a child holding its stdout)
    ("lingers", r"timed out after 1 s after printing a credential: it did not exit"),
    ("daemon", r"timed out after 1 s after printing a credential: it did not exit"),
])
def test_a_plugin_that_does_not_end_is_killed_at_its_time_bound(tmp_path, name, says):
    scripts = plugins(tmp_path / "bin")
    selected = select(kubeconfig_files(str(write(tmp_path / "k.yaml", kubeconfig(user=_exec(str(scripts[name])))))),
                      None)
    assert selected.plugin is not None
    started = time.monotonic()
    with pytest.raises(ClusterError, match=says):
        run_plugin(selected.plugin, timeout_s=1)
    assert time.monotonic() - started < 20


def test_a_plugin_that_floods_is_stopped_at_its_output_cap(tmp_path):
    scripts = plugins(tmp_path / "bin")
    line = _refusal(write(tmp_path / "k.yaml", kubeconfig(user=_exec(str(scripts["flood"])))))
    assert "flood.sh" in line and f"printed more than {EXEC_OUTPUT_BYTES // 1024}.0 KiB on stdout" in line, line


@pytest.mark.parametrize(("name", "says"), [
    ("exit3", "exited 3: login expired: run login"), ("garbage", "printed no valid ExecCredential (not JSON)"),
    ("not_executable", "not an executable file"),
    ("unicode_token", "the token holds a character that is not ASCII"), ("nan_token", "neither a token"),
])
def test_a_failing_plugin_is_named_with_its_reason(tmp_path, name, says):
    scripts = plugins(tmp_path / "bin")
    line = _refusal(write(tmp_path / "k.yaml", kubeconfig(user=_exec(str(scripts[name])))))
    assert "user 'u': exec" in line and says in line and "k.yaml" in line, line


def test_a_plugin_not_on_path_names_the_kubeconfig_and_user(tmp_path):
    line = _refusal(write(tmp_path / "k.yaml", kubeconfig(user=_exec("no-such-plugin-elxpk"))))
    assert "user 'u': exec: command no-such-plugin-elxpk: not found on PATH" in line, line


def test_a_valid_plugin_token_is_sent_and_rerun_when_it_expires(fake, tmp_path):
    scripts = plugins(tmp_path / "bin")
    path = write(tmp_path / "k.yaml", kubeconfig(fake.url, user=_exec("bin/good.sh")))  # relative to the file
    kube = connect(ClusterTarget(kubeconfig=str(path)), resolved=True, environ=dict(os.environ))
    assert kube.jobset_crd_served() and kube.jobset_crd_served()
    assert fake.seen_tokens[-1] == "test-token"
    # Its credential expired in 2000: the client's refresh hook ran the plugin again before each request.
    assert len((scripts["good"].parent / "calls").read_text().splitlines()) >= 3


# --- KUBECONFIG -------------------------------------------------------------------------------------------------


def test_kubeconfig_env_entries_get_the_checks_and_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    good = write(tmp_path / "good.yaml", kubeconfig())
    for path, kind in special_files(tmp_path / "special").items():
        environ = {"KUBECONFIG": f"{good}{os.pathsep}{path}"}
        with pytest.raises(UsageError) as info:  # a missing one when the selection is resolved, the rest on read
            connect(ClusterTarget(), environ=environ)
        assert info.value.messages == [info.value.messages[0]]
        assert info.value.messages[0].startswith(f"KUBECONFIG {path}: ") and kind in info.value.messages[0]


def test_a_default_kubeconfig_that_is_a_fifo_is_refused_not_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".kube").mkdir()
    os.mkfifo(tmp_path / ".kube" / "config")
    with pytest.raises(UsageError, match=r"^kubeconfig .*\.kube/config: is a FIFO \(named pipe\), not a regular"):
        connect(ClusterTarget(), environ={})


def test_kubeconfig_env_list_merges_as_kubectl_does(fake, tmp_path):
    first = write(tmp_path / "a.yaml", kubeconfig(fake.url))
    other = kubeconfig("http://127.0.0.1:1", user={"token": "other"})
    other["current-context"] = "y"
    other["contexts"].append({"name": "y", "context": {"cluster": "c", "user": "u"}})
    second = write(tmp_path / "b.yaml", other)
    environ = {"KUBECONFIG": f"{first}{os.pathsep}{second}"}
    kube = connect(ClusterTarget(), environ=environ)  # first current-context, first cluster and user win
    assert kube.host == fake.url and kube.jobset_crd_served() and fake.seen_tokens[-1] == "test-token"
    assert connect(ClusterTarget(context="y"), environ=environ).host == fake.url  # y's cluster "c" is a.yaml's


# --- the property: any kubeconfig shape is a clean connect or one line with exit 2 ------------------------------

PROPERTY = settings(max_examples=150, derandomize=True, database=None, deadline=timedelta(seconds=30),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
_odd = st.one_of(st.none(), st.integers(), st.booleans(), st.text(max_size=12), st.lists(st.integers(), max_size=2),
                 st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))
_servers = st.one_of(st.sampled_from(["http://127.0.0.1:1", "127.0.0.1:1", "localhost:1", "https://[::1]:1",
                                      "", "::::", "ftp://h", "http://", "https://[::1", "http://h:99999",
                                      "http://h:1/prefix", "h:1:2", "https://h\n:1"]), _odd)
_proxies = st.one_of(st.sampled_from(["http://127.0.0.1:3128", "https://p:1", "socks5://p:1", "socks4a://p",
                                      "::::", "", "http://", "p:3128"]), _odd)


@st.composite
def _kubeconfigs(draw, refs: list[str], scripts: dict[str, Path]) -> object:
    cluster: dict = {"server": draw(_servers)}
    user: dict = {}
    if draw(st.booleans()):
        cluster["proxy-url"] = draw(_proxies)
    for part, field in FILE_FIELDS:
        if draw(st.integers(0, 3)) == 0:
            (cluster if part == "cluster" else user)[field] = draw(st.one_of(st.sampled_from(refs), _odd))
    choice = draw(st.integers(0, 4))
    if choice == 0:
        user["exec"] = draw(st.one_of(_odd, st.fixed_dictionaries({
            "apiVersion": st.sampled_from([EXEC_API, "v1", 3]),
            "command": st.one_of(st.sampled_from([str(scripts[k]) for k in ("flood", "exit3", "garbage", "good",
                                                                           "not_executable")]), _odd)},
            optional={"args": st.one_of(st.lists(st.text(max_size=5), max_size=2), st.just(["a\0b"]), _odd),
                      "env": st.one_of(st.just([{"name": "A", "value": "b"}]),
                                       st.just([{"name": "A=B", "value": "\0"}]), _odd),
                      "interactiveMode": st.sampled_from(["Never", "IfAvailable", "Always"])})))
    elif choice == 1:
        user["token"] = draw(st.one_of(st.just("t"), _odd))
    elif choice == 2:
        user["auth-provider"] = draw(st.one_of(st.just({"name": "gcp"}), _odd))
    config = kubeconfig(cluster=None, user=user)
    config["clusters"][0]["cluster"] = cluster
    # Break the shape itself now and then: a missing key, a wrong type where a mapping or list belongs.
    for key in draw(st.lists(st.sampled_from(["clusters", "users", "contexts", "current-context"]), max_size=2)):
        config[key] = draw(_odd)
    if draw(st.integers(0, 5)) == 0:
        config["clusters"] = [{"name": "c", "cluster": draw(_odd)}]
    return config


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    where = tmp_path_factory.mktemp("world")
    refs = [*special_files(where / "special"), str(where / "ca.pem"), "relative.pem"]
    (where / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n")
    return where, refs, plugins(where / "bin")


@PROPERTY
@given(data=st.data())
def test_any_kubeconfig_shape_connects_or_is_one_line_exit_2(world, data):
    where, refs, scripts = world
    path = write(where / "k.yaml", data.draw(_kubeconfigs(refs, scripts)))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_guarded(lambda: connect(ClusterTarget(kubeconfig=str(path)), resolved=True,
                                           environ=dict(os.environ)) and 0)
    lines = err.getvalue().splitlines()
    assert code in (0, 2), err.getvalue()
    assert out.getvalue() == ""
    if code == 0:
        assert lines == [], lines  # no urllib3 warning, no library log line
    else:
        assert len(lines) == 1 and lines[0].startswith("error: "), lines
        assert "internal error" not in lines[0] and "Traceback" not in lines[0]


@pytest.mark.parametrize(("config", "says"), [
    # client-go refuses both; the library would send no credentials, or trust the CA and skip it at once
    (kubeconfig(contexts=[{"name": "x", "context": {"cluster": "c", "user": "nope"}}]),
     "user 'nope' of context 'x' not found"),
    (kubeconfig("https://127.0.0.1:1", cluster={"insecure-skip-tls-verify": True, "certificate-authority-data": "Zm9v"}),
     "insecure-skip-tls-verify with a certificate-authority"),
    # a header value http.client cannot send: UnicodeEncodeError or ValueError deep in a request before
    (kubeconfig(user={"token": "t\u00f6k\u20acn"}), "user 'u': the token holds a character that is not ASCII"),
    (kubeconfig(user={"token": "abc\r\nX-Evil: 1"}), "the token holds a line break or control character"),
    (kubeconfig(user={"username": "a", "password": "p\u20acss"}), "the password holds a character that is not ASCII"),
], ids=["missing-user", "insecure-with-ca", "unicode-token", "token-crlf", "unicode-password"])
def test_fifth_pass_kubeconfig_shapes_are_one_line(tmp_path, config, says):
    line = _refusal(write(tmp_path / "k.yaml", config))
    assert says in line and "k.yaml" in line, line


def test_fifth_pass_kubeconfigs_that_are_fine_connect(fake, tmp_path):
    """A billion-laughs alias tree in fields elxpk does not use, unicode names, an empty KUBECONFIG entry."""
    laughs = "a: &a [" + ",".join(["x"] * 9) + "]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8))
    (tmp_path / "laughs.yaml").write_text(
        laughs + f"apiVersion: v1\nkind: Config\ncurrent-context: x\npreferences: *i\n"
        f"clusters: [{{name: c, cluster: {{server: '{fake.url}', extensions: *i}}}}]\n"
        "users: [{name: u, user: {token: test-token, extensions: *i}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u, extensions: *i}}]\n")
    started = time.monotonic()
    assert connect(ClusterTarget(kubeconfig=str(tmp_path / "laughs.yaml")), resolved=True, environ={}).jobset_crd_served()
    assert time.monotonic() - started < 30  # 9**9 leaves, never expanded
    write(tmp_path / "uni.yaml", {
        "apiVersion": "v1", "kind": "Config", "current-context": "ctx-\u00fc\u2713",
        "clusters": [{"name": "\u96c6\u7fa4", "cluster": {"server": fake.url}}],
        "users": [{"name": "\u30e6\u30fc\u30b6\u30fc", "user": {"token": "test-token"}}],
        "contexts": [{"name": "ctx-\u00fc\u2713", "context": {"cluster": "\u96c6\u7fa4",
                                                              "user": "\u30e6\u30fc\u30b6\u30fc"}}]})
    environ = {"KUBECONFIG": f"{tmp_path / 'uni.yaml'}::{tmp_path / 'laughs.yaml'}"}
    assert connect(ClusterTarget(), environ=environ).jobset_crd_served()
    ipv6 = connect(ClusterTarget(kubeconfig=str(write(tmp_path / "v6.yaml", kubeconfig("https://[::1]:6443")))),
                   resolved=True, environ={})
    assert ipv6.host == "https://[::1]:6443"

"""Every API answer is input: a size cap, a total deadline and a shape check, against a loopback server
that sends what a proxy, a login page or a broken middlebox would (tests/support/hostile_apiserver.py)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk.cluster.api.answer import RESPONSE_BYTES
from elxpk.errors import ClusterError, ConflictError, ElxpkError, Timeout
from tests.cluster.conftest import run_cli
from tests.support.hostile_apiserver import Answer, HostileServer

DEADLINE_S = 1.5
BOUND_S = DEADLINE_S + 10.0  # a generous upper limit: it catches a hang, it measures nothing

A_LIST = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"},
                     "items": [{"metadata": {"name": "p", "labels": {}}}]}).encode()
A_JOBSET = json.dumps({"kind": "JobSet", "apiVersion": "jobset.x-k8s.io/v1alpha2",
                       "metadata": {"name": "train", "namespace": "default", "uid": "u"}}).encode()
HTML = b"<html><head><title>Sign in</title></head><body>Please log in to the corporate proxy</body></html>"


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileServer]:
    server = HostileServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kubeconfig_h(hostile: HostileServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hostile.write_kubeconfig(tmp_path_factory.mktemp("h") / "kubeconfig")


@pytest.fixture(scope="module")
def kube_h(kubeconfig_h: Path):  # noqa: ANN201
    from elxpk.cluster.access.connect import connect
    from elxpk.cluster.access.target import ClusterTarget

    kube = connect(ClusterTarget(kubeconfig=str(kubeconfig_h)), sleep=lambda s: None)
    kube.total_s = DEADLINE_S
    return kube


def bodies() -> st.SearchStrategy[bytes]:
    deep = st.integers(1, 100_000).map(lambda n: b"[" * n + b"]" * n)
    open_deep = st.integers(1_000, 100_000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n)
    shapes = st.sampled_from([b"[1,2,3]", b"3", b'"text"', b"null", b"true", b'{"items": 3}', b'{"items": [1, 2]}',
                              b'{"items": "x"}', b'{"metadata": []}', b'{"metadata": {"continue": 5}}',
                              b'{"kind": "Status"}', b"{not json", b"", b"\xff\xfe{}", b'{"a": NaN}',
                              b"[Infinity]", b'{"items": [{"x": -Infinity}]}'])
    truncated = st.integers(0, len(A_LIST) - 1).map(lambda n: A_LIST[:n])
    return st.one_of(st.binary(max_size=300), st.just(HTML), deep, open_deep, shapes, truncated,
                     st.just(A_LIST), st.just(A_JOBSET))


def call(kube, which: str):  # noqa: ANN001, ANN201
    if which == "list":
        return kube.list_pods("default", "a=b")
    if which == "get":
        return kube.get_jobset("default", "train")
    return kube.delete_pod("default", "p", uid="u")


def check(kube, hostile: HostileServer, which: str, answer: Answer) -> None:  # noqa: ANN001
    hostile.answer = answer
    started = time.monotonic()
    try:
        result = call(kube, which)
    except ElxpkError as exc:
        message = str(exc)
        assert "\n" not in message and message.strip(), message
        assert not isinstance(exc, Timeout)  # no caller deadline was given: the request's own is a ClusterError
        if 200 <= answer.status <= 299 or answer.mode in ("trickle", "slow_headers", "endless"):
            assert hostile.url in message, message  # what is not the object expected names the host
    else:
        if which == "list":
            assert isinstance(result, list) and all(isinstance(i, dict) for i in result)
        elif which == "get":
            assert isinstance(result, dict)
        assert 200 <= answer.status <= 299
    assert time.monotonic() - started < BOUND_S


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=bodies(), status=st.sampled_from([200, 201, 204, 302, 400, 404, 409, 410, 422, 429, 500, 503]),
       mode=st.sampled_from(["length", "chunked", "close"]), which=st.sampled_from(["list", "get", "delete"]))
def test_any_answer_is_one_line_or_the_object(kube_h, hostile: HostileServer, body: bytes, status: int, mode: str,
                                             which: str) -> None:
    check(kube_h, hostile, which, Answer(status=status, body=body, mode=mode,
                                         content_type="text/html" if body.startswith(b"<") else "application/json"))


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(mode=st.sampled_from(["trickle", "slow_headers"]), pause=st.sampled_from([0.05, 0.3, 2.0]),
       which=st.sampled_from(["list", "get"]))
def test_a_trickle_ends_at_the_total_deadline(kube_h, hostile: HostileServer, mode: str, pause: float,
                                              which: str) -> None:
    hostile.answer = Answer(body=A_LIST + b" " * 200, mode=mode, pause_s=pause)
    started = time.monotonic()
    with pytest.raises(ClusterError, match=f"{hostile.url}.*within"):
        call(kube_h, which)
    assert time.monotonic() - started < BOUND_S


def test_an_endless_body_stops_at_the_cap(kube_h, hostile: HostileServer) -> None:
    hostile.answer = Answer(mode="endless")
    kube_h.total_s = 60.0  # the cap, not the deadline, ends it
    try:
        with pytest.raises(ClusterError, match=f"{hostile.url} sent more than {RESPONSE_BYTES // 2**20} MiB"):
            kube_h.list_pods("default", "a=b")
    finally:
        kube_h.total_s = DEADLINE_S


def test_html_and_deep_nesting_are_named(kube_h, hostile: HostileServer) -> None:
    hostile.answer = Answer(content_type="text/html", body=HTML)
    with pytest.raises(ClusterError) as info:
        kube_h.list_pods("default", "a=b")
    assert str(info.value).startswith(f"{hostile.url} answered 200 with text/html to list Pods")
    assert "not JSON: '<html><head><title>Sign in</title></head><body>Please log in…'" in str(info.value)
    hostile.answer = Answer(body=b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(ClusterError, match="nested too deeply"):
        kube_h.get_jobset("default", "train")
    hostile.answer = Answer(body=b"[1,2,3]")
    with pytest.raises(ClusterError, match="a JSON list, not an object"):
        kube_h.list_pods("default", "a=b")


def test_a_409_on_a_read_is_not_already_exists(kube_h, hostile: HostileServer) -> None:
    hostile.answer = Answer(status=409, body=b'{"kind":"Status","message":"the object has been modified"}')
    with pytest.raises(ConflictError) as info:
        kube_h.get_jobset("default", "train")
    assert "already exists" not in str(info.value)
    assert "409 Conflict to get JobSet" in str(info.value) and "modified" in str(info.value)


def test_the_callers_deadline_holds_while_a_request_is_in_flight(kube_h, hostile: HostileServer) -> None:
    hostile.answer = Answer(body=A_LIST, mode="trickle", pause_s=0.5)
    kube_h.total_s = 60.0
    started = time.monotonic()
    try:
        with kube_h.within(1.0), pytest.raises(Timeout, match="time given ran out"):
            kube_h.list_pods("default", "a=b")
    finally:
        kube_h.total_s = DEADLINE_S
    assert time.monotonic() - started < 1.0 + 10.0


def test_a_watch_line_is_bounded_and_a_torn_watch_ends(kube_h, hostile: HostileServer) -> None:
    event = json.dumps({"type": "ADDED", "object": {"metadata": {"name": "p", "resourceVersion": "9"}}}).encode()
    hostile.answer = Answer(body=event + b"\n[1]\n" + event + b"\n", mode="chunked")
    got = list(kube_h.watch_pods("default", "a=b", timeout_s=1))
    assert got == [("ADDED", {"metadata": {"name": "p", "resourceVersion": "9"}})]  # the list ended the watch
    hostile.answer = Answer(mode="endless")  # one endless line: cut at the line cap, not parsed, watch ends
    assert list(kube_h.watch_pods("default", "a=b", timeout_s=1)) == []


def test_verbs_say_one_line_exit_1(hostile: HostileServer, kubeconfig_h: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("ELXPK_API_DEADLINE", str(DEADLINE_S))
    k = ["--kubeconfig", str(kubeconfig_h)]
    for answer in (Answer(content_type="text/html", body=HTML), Answer(body=b"[1,2,3]"),
                   Answer(body=b"[" * 100_000), Answer(body=A_LIST, mode="trickle", pause_s=0.4)):
        hostile.answer = answer
        for argv in (("workload", "status", "train"), ("workload", "list"), ("workload", "events", "train"),
                     ("workload", "logs", "train"), ("workload", "delete", "train", "--yes"),
                     ("workload", "kill-slice", "train", "--slice", "0", "--yes")):
            code, _, err = run_cli(capsys, *argv, *k)
            assert code == 1, (argv, err)
            lines = [line for line in err.splitlines() if not line.startswith("#")]
            assert len(lines) == 1 and hostile.url in lines[0] and "internal error" not in err, (argv, err)


def test_a_bad_deadline_setting_is_exit_2(kubeconfig_h: Path, capsys, monkeypatch) -> None:
    for value in ("0", "-1", "soon", "nan", "inf"):
        monkeypatch.setenv("ELXPK_API_DEADLINE", value)
        code, _, err = run_cli(capsys, "workload", "status", "train", "--kubeconfig", str(kubeconfig_h))
        assert code == 2 and err.count("\n") == 1 and "ELXPK_API_DEADLINE" in err, err


@pytest.mark.parametrize("argv", [
    ("workload", "status", "train"), ("workload", "list"), ("workload", "events", "train"),
    ("workload", "logs", "train"), ("workload", "wait", "train", "--timeout", "5s"),
    ("workload", "delete", "train"), ("workload", "delete", "--all", "--yes"),
    ("workload", "kill-slice", "train", "--slice", "0", "--yes")])
def test_every_verb_names_a_namespace_that_does_not_exist(fake, k, capsys, argv) -> None:
    code, _, err = run_cli(capsys, *argv, "-n", "no-such-ns", *k)
    assert code == 2, err
    assert err.strip().splitlines() == ['error: namespace "no-such-ns" does not exist on this cluster: create it '
                                        "(kubectl create namespace no-such-ns) or pass --namespace/-n with an "
                                        "existing one"], err


def test_create_into_a_namespace_that_does_not_exist_creates_nothing(fake, k, capsys) -> None:
    before = sum(len(bucket) for bucket in fake.store.objects.values())
    code, _, err = run_cli(capsys, "workload", "create", "--workload", "run-1", "--tpu-type", "v5p-8",
                           "--command", "python3 train.py", "-n", "no-such-ns", *k)
    assert code == 2 and 'namespace "no-such-ns" does not exist' in err and err.count("\n") == 1, err
    assert fake.count("POST") == 0 and sum(len(b) for b in fake.store.objects.values()) == before


def test_a_create_refused_by_namespace_lifecycle_is_exit_2_too(fake, kube) -> None:
    """When the namespace goes between the preflight and the create (or namespaces cannot be read), the
    API server's own 404 names it."""
    from elxpk.errors import UsageError

    with pytest.raises(UsageError, match='namespace "gone" does not exist'):
        kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, "gone")


def _elxpk(*argv: str, env_extra: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    import os
    import sys

    script = str(Path(sys.executable).parent / "elxpk")  # the console script, as a user runs it
    started = time.monotonic()
    done = subprocess.run([script, *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env_extra})
    return done, time.monotonic() - started


@pytest.mark.parametrize("argv, code", [(("workload", "status", "train"), 1), (("workload", "list"), 1),
                                        (("workload", "wait", "train", "--timeout", "3s"), 124)])
def test_the_console_script_against_a_trickle(hostile: HostileServer, kubeconfig_h: Path, argv, code) -> None:
    """One byte every 0.4 s, which no socket timeout trips: status and list end at ELXPK_API_DEADLINE,
    wait at its --timeout (exit 124), each in one line."""
    hostile.answer = Answer(body=A_LIST + b" " * 400, mode="trickle", pause_s=0.4)
    done, took = _elxpk(*argv, "--kubeconfig", str(kubeconfig_h), env_extra={"ELXPK_API_DEADLINE": "4"})
    assert done.returncode == code, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and hostile.url in lines[0] and "Traceback" not in done.stderr, done.stderr
    assert took < 60  # a generous bound: it catches the hang, it measures nothing


def test_the_console_script_against_an_html_page(hostile: HostileServer, kubeconfig_h: Path) -> None:
    hostile.answer = Answer(content_type="text/html", body=HTML)
    done, _ = _elxpk("workload", "status", "train", "--kubeconfig", str(kubeconfig_h), env_extra={})
    assert done.returncode == 1, done
    assert done.stderr.strip().splitlines() == [
        f"error: {hostile.url} answered 200 with text/html to get JobSet \"train\" in namespace \"default\", not "
        "JSON: '<html><head><title>Sign in</title></head><body>Please log in…'; is --kubeconfig/--context "
        "pointing at the API server (not a proxy or login page)?"], done.stderr


def _gzip_bomb(encoding: str) -> bytes:
    import zlib

    packer = zlib.compressobj(9, zlib.DEFLATED, 31 if encoding == "gzip" else 15)
    return packer.compress(b"{" + b" " * (2**28)) + packer.flush()  # ~260 KB that inflate to 256 MiB


@pytest.mark.parametrize("answer, says", [
    # NaN and Infinity parse in Python's json, but are not JSON: a NaN count ended in int() (the fifth pass)
    (Answer(body=b'{"kind":"JobSet","metadata":{"name":"train"},"status":{"restarts":NaN}}'), "NaN is not a JSON"),
    (Answer(body=b'{"items":[],"metadata":{"resourceVersion":Infinity}}'), "Infinity is not a JSON number"),
    (Answer(body=b'{"a":-Infinity}'), "-Infinity is not a JSON number"),
    (Answer(status=302, headers=(("Location", "http://127.0.0.1:1/login"),)), "a redirect to 'http://127.0.0.1:1/"),
    (Answer(status=301, headers=(("Location", "/again"),)), "follows no redirect"),  # a loop, not followed
    (Answer(status=307), "a redirect with no Location"),
    (Answer(status=999), "answered 999"),  # not a 5xx: not retried
    (Answer(status=429, headers=(("Retry-After", "999999999"),)), "429"),  # bounded by Kube, not slept
    (Answer(status=503, headers=(("Retry-After", "86400"),)), "503"),
    (Answer(body=_gzip_bomb("gzip"), headers=(("Content-Encoding", "gzip"),)), "sent more than"),
    (Answer(body=_gzip_bomb("deflate"), headers=(("Content-Encoding", "deflate"),)), "sent more than"),
    (Answer(body=b"\x00\x01\x02", headers=(("Content-Encoding", "br"),)), "not JSON"),
])
def test_fifth_pass_answers_are_one_line(kube_h, hostile: HostileServer, answer: Answer, says: str) -> None:
    for which in ("list", "get"):
        hostile.answer = answer
        hostile.requests = 0
        started = time.monotonic()
        with pytest.raises(ClusterError) as info:
            call(kube_h, which)
        assert says in str(info.value) and "\n" not in str(info.value), str(info.value)
        assert time.monotonic() - started < BOUND_S
        if answer.status in (999, 301, 302, 307):
            assert hostile.requests == 1  # neither retried nor followed


@pytest.mark.parametrize("status, asked, slept", [
    (503, "3", [3.0, 3.0, 3.0]),  # waited as asked
    (429, "120", [30.0, 30.0, 30.0]),  # at most 30 s
    (429, "nan", [0.5, 1.0, 2.0]),  # no number: the back-off
    (500, "3", [0.5, 1.0, 2.0]),  # a 500's Retry-After is not one RFC 9110 defines
])
def test_a_retry_after_is_waited_on_within_the_one_policy(kubeconfig_h, hostile: HostileServer, status: int,
                                                          asked: str, slept: list[float]) -> None:
    from elxpk.cluster.access.connect import connect
    from elxpk.cluster.access.target import ClusterTarget

    delays: list[float] = []
    kube = connect(ClusterTarget(kubeconfig=str(kubeconfig_h)), sleep=delays.append)
    hostile.answer = Answer(status=status, headers=(("Retry-After", asked),))
    hostile.requests = 0
    with pytest.raises(ClusterError, match=f"answered {status} .* after 4 attempts"):
        kube.list_pods("default", "a=b")
    assert delays == slept and hostile.requests == 4


def test_a_bom_before_the_object_is_read(kube_h, hostile: HostileServer) -> None:
    hostile.answer = Answer(body=b"\xef\xbb\xbf" + A_LIST)  # RFC 8259 lets a parser ignore it; json does
    assert kube_h.list_pods("default", "a=b") == [{"metadata": {"name": "p", "labels": {}}}]


def test_the_console_script_against_a_nan(hostile: HostileServer, kubeconfig_h: Path) -> None:
    hostile.answer = Answer(body=b'{"kind":"JobSet","metadata":{"name":"train","uid":"u"},'
                                 b'"spec":{"replicatedJobs":[{"name":"s","replicas":NaN}]},"status":{"restarts":NaN}}')
    done, _ = _elxpk("workload", "status", "train", "--kubeconfig", str(kubeconfig_h), env_extra={})
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "NaN is not a JSON number" in lines[0] and hostile.url in lines[0], done.stderr

"""Credentials without subprocesses: kubeconfig files, and the GKE path (Container API + google.auth) over TLS."""

from __future__ import annotations

from pathlib import Path

import pytest

from elxpk.cluster.access.connect import connect
from elxpk.cluster.access.defaults import resolve_target
from elxpk.cluster.access.target import ClusterTarget
from elxpk.errors import ClusterError, NotFoundError, UsageError
from tests.support.fake_apiserver import start_fake
from tests.support.fake_gke import FakeGke
from tests.support.tls import make_tls


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture()
def tls_fake(tls, jobset_crd):
    server = start_fake(crd_file=jobset_crd, tls=tls.server_context(), token=None)
    yield server
    server.stop()


@pytest.fixture()
def gke(tls, tls_fake):
    fake = FakeGke().start()
    fake.add_cluster("proj", "us-central2-b", "tpu-cluster", endpoint=tls_fake.url.removeprefix("https://"),
                     ca_pem=tls.ca_pem)
    yield fake
    fake.stop()


def _user_credentials(gke: FakeGke, tmp_path: Path):
    return gke.user_credentials()


def test_kubeconfig_sends_its_token_and_is_never_written(fake, kubeconfig):
    before = kubeconfig.read_text()
    kube = connect(ClusterTarget(kubeconfig=str(kubeconfig)))
    assert kube.jobset_crd_served()
    assert fake.seen_tokens[-1] == "test-token"
    assert kubeconfig.read_text() == before


def test_kubeconfig_context_is_selected(fake, tmp_path):
    import yaml

    path = fake.write_kubeconfig(tmp_path / "k.yaml")
    config = yaml.safe_load(path.read_text())
    config["users"].append({"name": "other", "user": {"token": "other-token"}})
    config["contexts"].append({"name": "second", "context": {"cluster": "fake", "user": "other"}})
    path.write_text(yaml.safe_dump(config))
    fake.token = None
    connect(ClusterTarget(kubeconfig=str(path), context="second")).jobset_crd_served()
    assert fake.seen_tokens[-1] == "other-token"


def test_kubeconfig_errors_name_the_flag(tmp_path):
    with pytest.raises(UsageError, match="--kubeconfig .*no such file"):
        connect(ClusterTarget(kubeconfig=str(tmp_path / "missing.yaml")))
    path = tmp_path / "k.yaml"
    path.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    with pytest.raises(UsageError, match=r"^--context 'nope': not found in --kubeconfig .*k.yaml; "):
        connect(ClusterTarget(kubeconfig=str(path), context="nope"))


def test_wrong_token_is_a_clear_401(fake, tmp_path):
    path = fake.write_kubeconfig(tmp_path / "k.yaml", token="stale")
    kube = connect(ClusterTarget(kubeconfig=str(path)))
    with pytest.raises(ClusterError, match=r"rejected the credentials \(401 Unauthorized\)"):
        kube.get_jobset("default", "x")


def test_gke_endpoint_ca_and_refreshed_token_over_tls(gke, tls_fake, tmp_path):
    gke.token_lifetime_s = 1  # google.auth treats tokens this close to expiry as stale: refresh every request
    creds = _user_credentials(gke, tmp_path)
    target = ClusterTarget(project="proj", location="us-central2-b", cluster="tpu-cluster")
    kube = connect(target, credentials=creds, container_endpoint=gke.url)
    assert kube.host == tls_fake.url
    assert kube.jobset_crd_served()
    assert kube.list_jobsets("default") == []
    # The Container API saw a bearer token; the API server saw fresh tokens from the token endpoint.
    [describe] = [r for r in gke.requests if r[0] == "GET"]
    assert describe[1] == "/v1/projects/proj/locations/us-central2-b/clusters/tpu-cluster"
    assert describe[2].startswith("Bearer ya29.fake-")
    assert set(tls_fake.seen_tokens) <= set(gke.issued)
    assert len(set(tls_fake.seen_tokens)) >= 2


def test_gke_via_application_default_credentials(gke, tls_fake, tmp_path, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(gke.write_service_account(tmp_path / "sa.json")))
    monkeypatch.setenv("ELXPK_CONTAINER_API_ENDPOINT", gke.url)
    kube = connect(ClusterTarget(project="proj", location="us-central2-b", cluster="tpu-cluster"))
    assert kube.jobset_crd_served()
    assert tls_fake.seen_tokens[-1] == gke.issued[-1]


def test_gke_wrong_ca_fails_verification(gke, tls_fake, tmp_path):
    other = make_tls(tmp_path / "other", common_name="impostor")
    gke.add_cluster("proj", "us-central2-b", "bad-ca", endpoint=tls_fake.url.removeprefix("https://"),
                    ca_pem=other.ca_pem)
    kube = connect(ClusterTarget(project="proj", location="us-central2-b", cluster="bad-ca"),
                   credentials=_user_credentials(gke, tmp_path), container_endpoint=gke.url)
    with pytest.raises(ClusterError, match="TLS or connection failure|cannot reach"):
        kube.get_jobset("default", "x")


def test_gke_not_found_and_denied(gke, tmp_path):
    creds = _user_credentials(gke, tmp_path)
    with pytest.raises(NotFoundError, match="GKE cluster nope .*not found: check --project, --zone/--region"):
        connect(ClusterTarget(project="proj", location="us-central2-b", cluster="nope"), credentials=creds,
                container_endpoint=gke.url)
    gke.denied = True
    with pytest.raises(ClusterError, match="you need container.clusters.get"):
        connect(ClusterTarget(project="proj", location="us-central2-b", cluster="tpu-cluster"), credentials=creds,
                container_endpoint=gke.url)


def test_gke_without_credentials_says_how_to_get_them(tmp_path, monkeypatch):
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))  # no gcloud ADC file here
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ClusterError, match="no Google credentials found") as info:
        connect(ClusterTarget(project="p", location="us-central2-b", cluster="c"), container_endpoint="http://127.0.0.1:9")
    # One exit code and one fix for missing credentials, here as for gs:// (elxpk_storage.gcs_auth).
    assert info.value.exit_code == 2 and "`gcloud auth application-default login`" in str(info.value)


def test_defaults_from_config_file_and_validation(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("project: p\nzone: us-central2-b\ncluster: c\nnamespace: team-a\n")
    env = {"ELXPK_CONFIG": str(cfg)}
    target = resolve_target(ClusterTarget(), namespace_given=False, environ=env)
    assert (target.project, target.location, target.cluster, target.namespace) == ("p", "us-central2-b", "c", "team-a")
    # A flag wins over the file; an explicit namespace too.
    target = resolve_target(ClusterTarget(cluster="other", namespace="default"), environ=env)
    assert (target.cluster, target.namespace) == ("other", "default")
    # A kubeconfig selects a non-GKE cluster and drops GKE defaults.
    target = resolve_target(ClusterTarget(kubeconfig="/k"), environ=env)
    assert (target.kubeconfig, target.project) == ("/k", None)

    (tmp_path / "empty.yaml").write_text("")
    with pytest.raises(UsageError) as info:
        resolve_target(ClusterTarget(cluster="c"), environ={"ELXPK_CONFIG": str(tmp_path / "empty.yaml"),
                                                             "KUBECONFIG": str(tmp_path / "none")})
    assert [m.split(" ")[0] for m in info.value.messages] == ["--project", "--zone"]
    cfg.write_text("projekt: p\n")
    with pytest.raises(UsageError, match="unknown key.*projekt"):
        resolve_target(ClusterTarget(), environ=env)


def test_environment_sits_between_flags_and_config_file(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("project: file-p\nzone: us-central2-b\ncluster: file-c\n")
    env = {"ELXPK_CONFIG": str(cfg), "ELXPK_PROJECT": "env-p", "ELXPK_REGION": "us-east5",
           "ELXPK_NAMESPACE": "env-ns"}
    target = resolve_target(ClusterTarget(cluster="flag-c"), namespace_given=False, environ=env)
    assert (target.project, target.location, target.cluster, target.namespace) == (
        "env-p", "us-east5", "flag-c", "env-ns")


def test_nothing_selected_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(UsageError, match="no cluster selected: give --project"):
        resolve_target(ClusterTarget(), environ={"XDG_CONFIG_HOME": str(tmp_path / "none")})


def test_gke_lookup_retries_an_unavailable_api_within_the_one_policy(gke, tmp_path):
    """elxpk/retry_policy.py's tries and pauses, not the Container API client's own (0.1 s x 1.3 for 20 s)."""
    creds, slept = _user_credentials(gke, tmp_path), []
    target = ClusterTarget(project="proj", location="us-central2-b", cluster="tpu-cluster")
    gke.unavailable = 2
    assert connect(target, credentials=creds, container_endpoint=gke.url, sleep=slept.append).host.startswith("https://")
    assert slept == [0.5, 1.0] and gke.unavailable == 0
    gke.unavailable = 10
    with pytest.raises(ClusterError, match=r"the Container API failed to describe cluster tpu-cluster .* after 4 "
                                           "attempts: .*unavailable"):
        connect(target, credentials=creds, container_endpoint=gke.url, sleep=slept.append)
    assert slept[2:] == [0.5, 1.0, 2.0] and gke.unavailable == 6

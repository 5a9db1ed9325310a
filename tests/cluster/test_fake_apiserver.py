"""The fake API server speaks the protocol the real client expects: discovery, selectors, paging, watch."""

from __future__ import annotations

import threading

import pytest

from tests.support.kube_store import parse_selector


def test_dynamic_client_discovers_and_round_trips(fake, kubeconfig, tmp_path):
    from kubernetes import config, dynamic
    from kubernetes.dynamic.exceptions import NotFoundError

    api = config.new_client_from_config(config_file=str(kubeconfig))
    client = dynamic.DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
    jobsets = client.resources.get(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet")
    from tests.cluster.conftest import pathways_jobset

    jobsets.create(body=pathways_jobset("dyn"), namespace="default")
    assert [j.metadata.name for j in jobsets.get(namespace="default").items] == ["dyn"]
    jobsets.delete(name="dyn", namespace="default")
    with pytest.raises(NotFoundError):
        jobsets.get(name="dyn", namespace="default")


def test_status_bodies_and_paging(fake, kube):
    from kubernetes.client.exceptions import ApiException

    store = fake.store
    for i in range(7):
        store.create(("", "pods"), {"metadata": {"name": f"p{i}", "namespace": "default",
                                                 "labels": {"app": "a" if i % 2 else "b"}},
                                    "spec": {"containers": [{"name": "c", "image": "i"}]}})
    body = kube.request("GET", "/api/v1/namespaces/default/pods", verb="list", what="pods",
                        query={"limit": 3, "labelSelector": "app in (a,b)"})
    assert len(body["items"]) == 3 and body["metadata"]["continue"] == "3"
    assert body["metadata"]["remainingItemCount"] == 4
    assert len(kube.list_pods("default", "app=a")) == 3
    assert len(kube.list_pods("default", "app!=a,app")) == 4
    api = kube.api_client
    request = api.param_serialize("GET", "/api/v1/namespaces/default/pods/nope", auth_settings=["BearerToken"])
    resp = api.call_api(*request)
    resp.read()
    import json

    status = json.loads(resp.data)
    assert (resp.status, status["kind"], status["reason"], status["details"]["name"]) == (404, "Status", "NotFound", "nope")
    assert isinstance(ApiException(http_resp=resp).body, str)


def test_label_selector_grammar():
    match = parse_selector("a=1,b!=2,c in (x, y),d notin (z),e,!f")
    assert match({"a": "1", "c": "x", "e": ""})
    assert not match({"a": "1", "c": "x", "e": "", "f": "1"})
    assert not match({"a": "1", "b": "2", "c": "x", "e": ""})
    with pytest.raises(ValueError):
        parse_selector("a in x")


def test_watch_streams_changes_as_json_lines(fake, kubeconfig):
    from kubernetes import client, config, watch

    api = config.new_client_from_config(config_file=str(kubeconfig))
    core = client.CoreV1Api(api)
    events: list[tuple[str, str]] = []
    ready = threading.Event()

    def consume() -> None:
        w = watch.Watch()
        for event in w.stream(core.list_namespaced_pod, "default", label_selector="app=w", timeout_seconds=5):
            events.append((event["type"], event["object"].metadata.name))
            ready.set()
            if len(events) == 3:
                w.stop()

    fake.store.create(("", "pods"), {"metadata": {"name": "w0", "namespace": "default", "labels": {"app": "w"}},
                                     "spec": {"containers": [{"name": "c", "image": "i"}]}})
    thread = threading.Thread(target=consume)
    thread.start()
    assert ready.wait(5)
    fake.store.create(("", "pods"), {"metadata": {"name": "other", "namespace": "default"},
                                     "spec": {"containers": [{"name": "c", "image": "i"}]}})
    fake.store.create(("", "pods"), {"metadata": {"name": "w1", "namespace": "default", "labels": {"app": "w"}},
                                     "spec": {"containers": [{"name": "c", "image": "i"}]}})
    fake.store.delete(("", "pods"), "default", "w0")
    thread.join(10)
    assert events == [("ADDED", "w0"), ("ADDED", "w1"), ("DELETED", "w0")]

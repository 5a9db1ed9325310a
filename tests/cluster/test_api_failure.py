"""The Kubernetes API's failures declare what callers read of them (issue 53): the answer's status, whether
another call may mend it, and the wait the answer asked for; nothing is attached after they are made."""

from __future__ import annotations

import pytest

from elxpk.cluster.api.api_errors import ApiFailure
from elxpk.cluster.api.kube_transport import api_path
from elxpk.errors import NotFoundError
from tests.support.fake_apiserver import Fault


def test_an_answer_another_try_may_mend_is_retryable_once_the_tries_ran_out(fake, kube):
    fake.faults.append(Fault("GET", "/namespaces/default$", "status", code=503, times=100))
    with pytest.raises(ApiFailure, match="answered 503") as raised:
        kube.get(api_path("v1", "namespaces", name="default"), what='namespace "default"')
    assert raised.value.retryable and raised.value.http_status == 503


def test_a_refusal_is_not_retryable_and_says_its_status(fake, kube):
    fake.faults.append(Fault("GET", "/namespaces/default$", "status", code=403))
    with pytest.raises(ApiFailure, match=r"permission denied \(403\)") as raised:
        kube.get(api_path("v1", "namespaces", name="default"), what='namespace "default"')
    assert not raised.value.retryable and raised.value.http_status == 403 and raised.value.retry_after is None


def test_a_namespace_this_user_may_not_read_is_unknown_not_missing(fake, kube):
    fake.faults.append(Fault("GET", "/namespaces/default$", "status", code=403))
    assert kube.namespace_exists("default") is None
    fake.faults.append(Fault("GET", "/namespaces/nowhere$", "status", code=404))
    with pytest.raises(NotFoundError):
        kube.get(api_path("v1", "namespaces", name="nowhere"), what='namespace "nowhere"')

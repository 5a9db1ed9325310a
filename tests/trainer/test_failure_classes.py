"""A failure class is one row (issue 53): the trainer's exit code, the elastic loop's events and the launcher's
retry of an HTTP answer all read elxpk_contract.failure_classes."""

from __future__ import annotations

import urllib.error
from email.message import Message

import jax
import pytest

from elxpk.retry_policy import transient_status
from elxpk_contract.exit_codes import BY_CODE
from elxpk_contract.failure_classes import (
    API_UNAVAILABLE,
    ELASTIC_CLASSES,
    MAYBE_SLICE_DOWN,
    NOT_CLASSIFIED,
    PEER_GONE,
    SLICE_DOWN,
    TRAINER_CLASSES,
    failure_class,
)
from trainer.elastic.outcome import exit_code_for, is_peer_gone
from trainer.elastic.policy import classify


def test_every_row_names_a_code_of_the_table_once():
    rows = (*TRAINER_CLASSES, API_UNAVAILABLE)
    assert len({row.name for row in rows}) == len(rows)
    assert all(BY_CODE[row.code.code] is row.code and row.words for row in rows)
    assert TRAINER_CLASSES[-1] is NOT_CLASSIFIED and NOT_CLASSIFIED.recognises(ValueError())


@pytest.mark.parametrize("error, row", [
    (jax.errors.JaxRuntimeError("DATA_LOSS: slice 1 is gone"), SLICE_DOWN),
    (jax.errors.JaxRuntimeError("INTERNAL: collective failed"), MAYBE_SLICE_DOWN),
    (jax.errors.JaxRuntimeError("CANCELLED: the peer went away"), PEER_GONE),
    (ValueError("DATA_LOSS: not jax's"), NOT_CLASSIFIED),
])
def test_the_classifiers_answer_with_the_row(error, row):
    assert failure_class(error) is row and exit_code_for(error) is row.code
    assert classify(error) == (row.name if row in ELASTIC_CLASSES else None)
    assert is_peer_gone(error) is (row.code is SLICE_DOWN.code)


def test_an_error_of_the_data_pipeline_is_the_users():
    from trainer.data.data import open_dataset

    with pytest.raises(AttributeError) as raised:
        open_dataset(None)  # the data code's own failure on a config it cannot read
    assert failure_class(raised.value).name == "user_code"


def test_the_launcher_retries_the_answers_of_its_row():
    assert [code for code in (200, 404, 408, 429, 499, 500, 507, 599, 600, 999) if transient_status(code)] == \
        [408, 429, 500, 507, 599]
    assert API_UNAVAILABLE.retryable and transient_status(503) is (503 in API_UNAVAILABLE.statuses)
    answered = urllib.error.HTTPError("https://hook.example", 503, "Service Unavailable", Message(), None)
    assert API_UNAVAILABLE.recognises(answered) and not API_UNAVAILABLE.recognises(ValueError("503"))

"""One answer never costs a checkpoint (issue 51, findings 1 and 2): a restore from `gs://` through the real
clients (gcsfs for listings, digests and orbax's metadata; tensorstore for the arrays) against the repo's
Cloud Storage endpoint (tests/support/fake_gcs.py), with one answer injected into one read of the newest
step. A "not found" for a file the digest lists and a listing shows is retried, never a missing file; only
two listings that agree make a file missing. A 403 or 503 on any read a restore makes is retried too."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elxpk_contract.transient import UNAVAILABLE, UnconfirmedAbsence, is_absence, transient_cause
from tests.conftest import REPO_ROOT
from tests.support.runs import PERIOD, STEPS

NEWEST, PREVIOUS = STEPS, STEPS - PERIOD
# One answer each, to one read of the newest step: the object is there and the next read of it succeeds.
ONE_ANSWER = {
    "orbax's metadata read answered 404": {f"read {NEWEST}/state/_METADATA": [404]},
    "the digest read answered 404": {f"read {NEWEST}/elxpk_digest.json": [404]},
    "the digest read answered 403": {f"read {NEWEST}/elxpk_digest.json": [403]},
    "a listed file's size answered 404": {f"stat {NEWEST}/state/_METADATA": [404]},
    "the commit marker's stat answered 404": {f"stat {NEWEST}/commit_success.txt": [404]},
    "tensorstore's manifest read answered 404": {f"read {NEWEST}/state/manifest.ocdbt": [404]},
    "the step metadata read answered 403": {f"read {NEWEST}/_CHECKPOINT_METADATA": [403]},
}


OUTAGE = 200  # answers of 503 in a row to tensorstore's read of the newest step's OCDBT manifest: an outage


@pytest.fixture(scope="module")
def outcomes(reference_run):
    cases = [{"name": name, "faults": faults} for name, faults in ONE_ANSWER.items()]
    cases.append({"name": "missing", "faults": {}, "delete": [f"{NEWEST}/state/_METADATA"]})
    cases.append({"name": "missing, and its read answered 404 too", "faults": {f"read {NEWEST}/state/_METADATA": [404]},
                  "delete": [f"{NEWEST}/state/_METADATA"]})
    # The outage waits on tensorstore's own backoff (about 45 s, elxpk_storage/client_bounds.py): it runs in a
    # process of its own beside the other cases, which wait on nothing (the trainer's backoff is a ManualClock).
    outage = [{"name": "outage", "faults": {f"read {NEWEST}/state/manifest.ocdbt": [503] * OUTAGE}}]
    procs = [subprocess.Popen([sys.executable, "-m", "tests.trainer.gs_restore_scenario",
                               str(reference_run.run_dir / "checkpoints"), json.dumps(group)],
                              cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for group in (cases, outage)]
    found: dict = {}
    stderr = ""
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        found.update(json.loads(out.splitlines()[-1]))
        stderr += err
    return found, stderr


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(ONE_ANSWER))
def test_one_answer_to_one_read_never_sets_the_newest_step_aside(outcomes, case):
    found = outcomes[0][case]
    assert found["unserved"] == {}, "the injected answer was never asked for: the case tests nothing"
    assert found["restored"] == NEWEST and found["skipped"] == [] and found["quarantined"] == []


@pytest.mark.slow
def test_a_file_two_listings_agree_is_missing_sets_the_step_aside(outcomes):
    for case in ("missing", "missing, and its read answered 404 too"):
        found = outcomes[0][case]
        assert found["restored"] == PREVIOUS, case
        assert found["skipped"] == [[NEWEST, "file missing: state/_METADATA"]], case
        assert found["quarantined"] and all(f"/elxpk-quarantine/{NEWEST}-" in n for n in found["quarantined"])


@pytest.mark.slow
def test_each_retry_says_which_read_and_that_no_step_was_set_aside(outcomes):
    warnings = [line for line in outcomes[1].splitlines() if line.startswith("warning: restore: ")]
    assert any("answered not found, but a fresh listing still shows it" in w for w in warnings), warnings
    assert all("no step set aside" in w for w in warnings)


def _chained(inner: BaseException, outer: BaseException) -> BaseException:
    try:
        raise outer from inner
    except BaseException as exc:  # noqa: BLE001 - built to be classified
        return exc


@given(st.text(max_size=200), st.sampled_from([ValueError, RuntimeError, OSError, Exception]))
def test_a_not_found_anywhere_in_the_chain_is_an_absence_and_never_transient_alone(text, kind):
    for error in (FileNotFoundError(text), _chained(FileNotFoundError(text), kind(text)),
                  kind(f"NOT_FOUND: {text}")):
        assert is_absence(error)
    assert transient_cause(FileNotFoundError(text)) is None  # content, once a listing agrees
    contradicted = _chained(FileNotFoundError(text), UnconfirmedAbsence(text))
    assert transient_cause(contradicted) == UNAVAILABLE  # a listing disagreed: retried, never content
    if "NOT_FOUND" not in text:
        assert not is_absence(kind(text))


@pytest.mark.slow
def test_an_outage_ends_the_restore_in_75_after_bounded_tries_of_every_client(outcomes):
    """Finding 3: tensorstore's own retries (32 by default, waits up to 32 s) are bounded to fit inside the
    trainer's 3 tries (elxpk_storage/client_bounds.py), so a persistent 503 reaches the exit 75 after a few
    requests, not half an hour. Counted in requests, not seconds."""
    found = outcomes[0]["outage"]
    assert str(found["restored"]).startswith(f"TrainerStopped: restore: reading step {NEWEST} failed 3 times "
                                             "(storage unavailable: "), found
    assert found["skipped"] == [] and found["quarantined"] == []
    (asked,) = found["asked"].values()
    assert 3 <= asked <= 3 * (1 + 4), asked  # the trainer's tries, each with tensorstore's 4 retries at most

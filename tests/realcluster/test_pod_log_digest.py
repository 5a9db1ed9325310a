"""A story's failure message keeps why a pod ended (pod_log_digest.py): the log of part 3's survivor as a
process-pool pod wrote it, cut to its shape (its reason above a dozen stack frames, a service's error
repeated on every retry of the restarted peer)."""

from __future__ import annotations

from tests.realcluster.pod_log_digest import LAST_LINES, digest, started

FATAL = ("F1206 13:13:42.336147      11 client.h:80] Terminating process because the JAX distributed service "
         "detected fatal errors. absl::Status: INTERNAL: Failed to disconnect from coordination service")
RETRY = ("E1206 13:13:42.{ms:06d}      18 coordination_service.cc:518] [98] 1 unexpectedly tried to connect "
         "while it is already in error.")
LOG = "\n".join([
    "elxpk start: Sun Dec  6 13:13:07 UTC 2026",
    "[Gloo] Rank 0 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1",
    "E1206 13:13:42.335325      18 coordination_service.cc:518] [98] 1 unexpectedly tried to connect with a "
    "different incarnation. It has likely restarted.",
    FATAL,
    *(RETRY.format(ms=ms) for ms in range(338001, 338007)),
    "*** Check failure stack trace: ***",
    *(f"    @     0x7f39fa44{i:04x}  xla::CoordinationServiceAgent::Shutdown()" for i in range(10)),
    'elxpk: line 1:    11 Aborted                 bash -c "$1"',
    "elxpk end: Sun Dec  6 13:13:42 UTC 2026 EXIT_CODE=134",
]) + "\n"


def test_the_reason_above_the_stack_frames_is_kept_and_a_repeated_error_shown_once():
    shown = digest(LOG).splitlines()
    why = shown[1:shown.index("last:")]
    assert shown[0] == "why:" and FATAL in why
    assert sum("coordination_service.cc:518]" in line for line in why) == 1  # the first of the retries only
    last = shown[shown.index("last:") + 1:]
    assert len(last) == LAST_LINES and last[-1].endswith("EXIT_CODE=134") and "Aborted" in last[-2]
    assert not any("@     0x" in line or "Check failure" in line for line in last)
    assert started(LOG) == "Sun Dec  6 13:13:07 UTC 2026"


def test_a_pod_that_ended_well_shows_its_last_lines_only():
    log = "elxpk start: Sun Dec  6 13:13:42 UTC 2026\ndone: 24 steps\nelxpk end: Sun Dec  6 13:13:56 UTC 2026 EXIT_CODE=0\n"
    assert digest(log).splitlines() == ["last:", *log.splitlines()]
    assert started("no wrapper here") == "?"

"""Every process lists gs:// afresh (part 3's second restart under CI's load): epath builds its gcsfs once per
process and keeps it, so whatever first reaches a gs:// path through epath decides whether that process's
listings are cached for good. Process 1 of a run with --fault read RUN_DIR/.faults-fired first, with the
listing cache on: it still listed a step process 0 had set aside at the restore, refused to save it again and
stalled the group's save. The first gs:// reads of a start (the compilation cache, the run directory, the
checkpoints) now each turn it off first. Checked in fresh interpreters (epath's cache is process-wide),
through the real clients against the repo's Cloud Storage endpoint (tests/support/fake_gcs.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START = """
import os
from tests.support.fake_gcs import FakeGcs
fake = FakeGcs().start()
fake.buckets.add("bkt")
os.environ.update({"STORAGE_EMULATOR_HOST": fake.url, "TENSORSTORE_GCS_HTTP_URL": fake.url,
                   "GOOGLE_AUTH_TOKEN_FOR_TESTING": "anon"})
from tests.support.runs import tiny_config
from trainer import compile_cache
{what}
from etils.epath import backend
print(backend.fsspec_backend._get_filesystem("gs").dircache.use_listings_cache)
fake.stop()
"""


CACHE = 'print(compile_cache.configure(tiny_config("unused", checkpoint_dir="gs://bkt/run/checkpoints"), {}))'
# A whole run on gs:// (every record and checkpoint there) as one process of a multi-controller group with a
# fault planned at a restore it never makes: its backend reads RUN_DIR/.faults-fired first, before any checkpoint is touched.
RUN = """import socket
from trainer.elastic.loop import train
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
cfg = tiny_config("gs://bkt/run", steps=2, checkpoint_period=2, slice_backend="multi-controller", num_slices=1,
                  num_processes=1, coordinator=f"127.0.0.1:{port}", fault=("0@restore",))
print(train(cfg).final_step)"""


def _scenario(what: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", START.replace("{what}", what)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()[-2:]  # what it printed last: before it, the run's own lines


def test_the_compile_cache_on_gs_leaves_epaths_gcsfs_without_a_listing_cache():
    assert _scenario(CACHE) == ["gs://bkt/run/xla-cache", "False"]


def test_a_run_on_gs_leaves_epaths_gcsfs_without_a_listing_cache():
    assert _scenario(RUN) == ["2", "False"]

"""Every process lists gs:// afresh (issue 51's part 3 restart, found under CI's load): epath builds its gcsfs
once per process and keeps it, so whatever first reaches a gs:// path through epath decides whether that
process's listings are cached for good. The compilation cache beside the checkpoints is that first path on
every process but 0 (process 0 takes the writer lease first). With the listing cache on there, process 1
still listed a step process 0 had set aside, refused to save it again and stalled the group's save. Checked in
a fresh interpreter (epath's cache is process-wide), through the real clients against the repo's Cloud
Storage endpoint (tests/support/fake_gcs.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = """
import os
from tests.support.fake_gcs import FakeGcs
fake = FakeGcs().start()
fake.buckets.add("bkt")
os.environ.update({"STORAGE_EMULATOR_HOST": fake.url, "TENSORSTORE_GCS_HTTP_URL": fake.url,
                   "GOOGLE_AUTH_TOKEN_FOR_TESTING": "anon"})
from tests.support.runs import tiny_config
from trainer import compile_cache
print(compile_cache.configure(tiny_config("unused", checkpoint_dir="gs://bkt/run/checkpoints"), {}))
from etils.epath import backend
print(backend.fsspec_backend._get_filesystem("gs").dircache.use_listings_cache)
fake.stop()
"""


def test_the_compile_cache_on_gs_leaves_epaths_gcsfs_without_a_listing_cache():
    done = subprocess.run([sys.executable, "-c", SCENARIO], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["gs://bkt/run/xla-cache", "False"], done.stdout

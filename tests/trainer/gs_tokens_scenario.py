"""Run in a fresh interpreter by test_token_data.py: a .npy token stream read from gs:// (in-memory fake).

argv[1]: a local .npy token stream. Prints one JSON object of observations.
"""

from __future__ import annotations

import json
import sys

from tests.trainer import fake_gcs

fake_gcs.install()

from etils import epath  # noqa: E402  (after the fake is registered, before epath caches a filesystem)

from elxpk_contract.errors import UsageError  # noqa: E402
from trainer.data.tokens import open_stream  # noqa: E402


def main(local: str) -> dict:
    data = epath.Path(local).read_bytes()
    epath.Path("gs://bucket/data/t.npy").write_bytes(data)
    epath.Path("gs://bucket/data/cut.npy").write_bytes(data[:-7])
    stream = open_stream("gs://bucket/data/t.npy", 16, 64)
    out: dict = {"examples": stream.examples(0, stream.num_examples).tolist(), "identity": stream.info.identity()}
    try:
        open_stream("gs://bucket/data/cut.npy", 16, 64)
    except UsageError as exc:
        out["truncated"] = exc.messages[0]
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))

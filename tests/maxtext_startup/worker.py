"""Runs MaxText 0.2.5's own start-up on argv after argv, in the MaxText venv (Python >= 3.12).

Not imported by the tests: `conftest.py` starts it as `<venv python> worker.py` and keeps it for the
session, because importing `maxtext.trainers.pre_train.train` (jax, flax, transformers...) costs seconds
and each `initialize` well under one.

Protocol: one JSON object per line on stdin, `{"argv": [...], "env": {"M_KEY": "value", ...}}`, where argv
is what `python -m maxtext.trainers.pre_train.train` received (argv[0] the program). For each, one JSON
line on the protocol stream: `{"ok": true, "values": {key: value}}` or `{"ok": false, "error": "Type:
message"}`. `{"op": "from_cli", "words": [...]}` runs only the first step of that, OmegaConf's parse of the
key=value words, and answers `{"ok": true, "values": {key: [type name, value]}}`. MaxText's own output (it
prints freely) goes to stderr.
"""

from __future__ import annotations

import json
import os
import socket
import sys

# The keys a test may compare against what elxpk promised.
REPORTED = ("base_output_directory", "run_name", "checkpoint_dir", "enable_checkpointing", "checkpoint_period",
            "steps", "elastic_enabled", "enable_single_controller", "elastic_timeout_seconds",
            "elastic_max_retries", "elastic_min_slice_count", "dataset_type", "grain_use_elastic_iterator",
            "grain_file_type", "packing", "use_truncation", "grain_train_files", "model_name", "jax_cache_dir")


def _plain(value: object) -> object:
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def _from_cli(words: list[str]) -> dict:
    """`words` as pyconfig reads them (OmegaConf.from_cli): {key: [type name, value]}, or the error."""
    import omegaconf

    try:
        parsed = omegaconf.OmegaConf.to_container(omegaconf.OmegaConf.from_cli(words), resolve=True)
    except Exception as exc:  # noqa: BLE001 - YAML and interpolation errors
        return {"ok": False, "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}
    return {"ok": True, "values": {k: [type(v).__name__, _plain(v)] for k, v in parsed.items()}}


def main() -> None:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # MaxText's prints go to stderr; stdout carries only the protocol
    sys.stdout = sys.stderr
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    # What the cluster provides: a multi-controller command (enable_single_controller=false) has MaxText
    # call jax.distributed.initialize, which on a TPU VM finds its coordinator itself. Here a one-process
    # coordinator stands in, started before any backend exists, so MaxText finds it initialized.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=1, process_id=0)
    from maxtext.trainers.pre_train import train

    protocol.write(json.dumps({"ready": True, "train": train.__file__}) + "\n")
    for line in sys.stdin:
        case = json.loads(line)
        if case.get("op") == "from_cli":  # only the parse of key=value words MaxText does first
            protocol.write(json.dumps(_from_cli(case["words"])) + "\n")
            continue
        added = {k: v for k, v in case.get("env", {}).items() if k not in os.environ}
        os.environ.update(added)
        try:
            config, _ = train.initialize(case["argv"])
            reply = {"ok": True, "values": {k: _plain(getattr(config, k, None)) for k in REPORTED}}
        except BaseException as exc:  # noqa: BLE001 - SystemExit, pydantic's ValidationError, YAML errors...
            if isinstance(exc, KeyboardInterrupt):
                raise
            message = " ".join(str(exc).split())[:600]
            reply = {"ok": False, "error": f"{type(exc).__name__}: {message}"}
        finally:
            for key in added:
                del os.environ[key]
        protocol.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()

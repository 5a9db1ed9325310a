"""Where a run's persistent XLA compilation cache lives (the `compilation_cache_dir` setting), as one rule
the trainer, the launcher and the MaxText overrides share. Standard library only (render path).

Every restart of a workload is a new process (multi-controller always; a JobSet restart too), and without a
persistent cache each one compiles the step from scratch: 24 s of a 53.6 s start for 125m on a v5e chip
(issue 41). So the cache is on by default, beside the checkpoints, where every restart of the workload can
read it: the checkpoint directory's sibling `xla-cache` (RUN_DIR/checkpoints -> RUN_DIR/xla-cache,
gs://b/run/checkpoints -> gs://b/run/xla-cache). A checkpoint directory at a bucket's or a filesystem's root
has no sibling, so the cache goes inside it: its name is no step number, so the checkpoint listings
(orbax's, `checkpoint inspect`, the quarantine, the digests) pass over it, as they pass over every name
that is not one.
"""

from __future__ import annotations

import posixpath

OFF = "off"  # the setting's value that turns the cache off
CACHE_NAME = "xla-cache"


def default_cache_dir(checkpoint_dir: str) -> str:
    """The cache beside `checkpoint_dir` (local or SCHEME://bucket/...)."""
    trimmed = checkpoint_dir.rstrip("/")
    scheme, sep, path = trimmed.partition("://")
    if sep:
        bucket, _, inside = path.partition("/")
        if not inside.strip("/"):
            return f"{trimmed}/{CACHE_NAME}"
        parent = posixpath.dirname(inside.rstrip("/"))
        return f"{scheme}://{bucket}/{parent + '/' if parent else ''}{CACHE_NAME}"
    if not trimmed:  # the filesystem's root
        return f"/{CACHE_NAME}"
    parent = posixpath.dirname(trimmed)
    return posixpath.join(parent, CACHE_NAME) if parent else CACHE_NAME


def cache_dir(setting: str | None, checkpoint_dir: str) -> str | None:
    """The cache directory a run uses: the setting as given, the default beside `checkpoint_dir` when it
    is not given (None), or None when it is `off`."""
    if setting is None:
        return default_cache_dir(checkpoint_dir)
    return None if setting.strip() == OFF else setting

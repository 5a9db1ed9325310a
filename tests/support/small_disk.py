"""A real full filesystem for the storage-full tests: a tmpfs of a chosen size, mounted on a test's folder.

Only root can mount; elsewhere the test skips with one line, and under CI=true (where the runner is root)
that is a failure. `fill_to(margin)` remounts the tmpfs at what it holds now plus `margin` bytes, so the
next write larger than the margin gets ENOSPC from the kernel, not from a fake.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

PAGE = 4096


class SmallDisk:
    def __init__(self, path: Path) -> None:
        self.path = path

    def used(self) -> int:
        st = os.statvfs(self.path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def resize(self, size_bytes: int) -> None:
        size = -(-size_bytes // PAGE) * PAGE
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True, capture_output=True)

    def read_only(self) -> None:
        """Remount it read-only (EROFS for every write from now): a volume mounted `readOnly`."""
        subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True, capture_output=True)

    def fill_to(self, margin: int) -> None:
        """From now on only `margin` more bytes fit."""
        self.resize(self.used() + margin)


def _cannot_mount() -> str | None:
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if not Path("/proc/filesystems").read_text().count("tmpfs"):
        return "this kernel has no tmpfs"
    return None


def mounted_small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    """A 16 MiB tmpfs at tmp_path/disk, unmounted after the test: the body of each module's `small_disk`
    fixture (`yield from mounted_small_disk(tmp_path)`)."""
    reason = _cannot_mount()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the storage-full tests need a real tmpfs: {reason}")
        pytest.skip(f"storage-full tests: {reason}")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], check=True, capture_output=True)
    try:
        yield SmallDisk(mount)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)

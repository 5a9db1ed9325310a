"""`elxpk workload kill-slice` armed at its y/N question, as an operator at a terminal leaves it, then fired.

Story 2 kills a slice once a checkpoint has committed, and the tiny trainer finishes 20 steps later (about
11 s on a quiet machine). Started with `--yes` at that moment, the command's own start-up and cluster reads
came after the run had ended in 5 of 6 story-2 runs at a CI load of 15-20: the kill landed on finished pods.
Armed early instead (started without `--yes` on a pseudo-terminal, so `confirm` asks), the command has done
its start-up and, for `--mode delete`, listed the slice's pods while the trainer compiles; answering `y`
then costs one API call. The answer is typed, the command's output read back, and its exit code checked,
all through the console script a user runs.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time

PROMPT = b"[y/N]"  # click's confirm, behind the question of elxpk/cluster/verbs/kill_slice.py


class ArmedKill:
    def __init__(self, argv: list[str], env: dict[str, str], timeout: float = 180) -> None:
        """Start `argv` (a kill-slice without --yes) on a pseudo-terminal and wait for its question."""
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
        os.close(slave)
        self.output = b""
        self._read(until=PROMPT, timeout=timeout)
        assert PROMPT in self.output, f"kill-slice never asked (exit {self.proc.poll()}): {self.text}"

    @property
    def text(self) -> str:
        return self.output.decode(errors="replace")

    def _read(self, until: bytes | None, timeout: float) -> None:
        """Read the terminal until `until` shows (None: until the command closes it) or `timeout` passes."""
        deadline = time.monotonic() + timeout
        while (until is None or until not in self.output) and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # EIO: the command exited and closed its end
                chunk = b""
            if not chunk:
                return
            self.output += chunk

    def fire(self, timeout: float = 120) -> tuple[int, str]:
        """Answer y; (the exit code, everything the command wrote)."""
        os.write(self.master, b"y\n")
        self._read(until=None, timeout=timeout)
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            os.close(self.master)
        return code, self.text

    def cancel(self) -> None:
        """Stop an armed command that was never fired (a test that failed before it)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        try:
            os.close(self.master)
        except OSError:
            pass

"""The health check a returning slice passes before it receives the state (issue 23 item 4).

A slice that comes back after a loss (the end of a pause, a scale-up in resize mode) may be back in name
only: a wedged driver, a device that computes wrong results, a link that hangs collectives. pathwaysutils'
probe (x + 1 on each device, trainer.elastic.slices) sees none of that. Before the state is copied onto a
returning slice, `check_slice` runs on its own devices:

1. a matmul with a known result on each device: small integer matrices, so the float32 product is exact
   and compared bit for bit with numpy's integer product;
2. a collective over the slice's devices: an array sharded over them, summed into a result replicated on
   every device (an all-reduce), each device's copy compared with the known total;

all under a timeout (a check that hangs is a failed check; its thread is left behind as a daemon, the way
a hung collective cannot be interrupted from Python anyway).

`RejoinGate` applies it: a returning slice that fails is treated as still lost (left out of the slices
the next attempt, or the scale-up, uses), and a `rejoin_refused` event records why, once per slice and
reason. A verdict is kept for `recheck_s` (the elastic poll interval), so a slice that stays sick is
checked again at most that often, and one that passed is not checked twice on its way in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from trainer.clock import Clock
    from trainer.metrics import RunRecorder

# Bound on one slice's check. The check compiles two tiny programs per slice (milliseconds on CPU, a few
# seconds at most on a TPU), so a minute is only ever reached by a device or link that does not answer.
CHECK_TIMEOUT_S = 60.0
_N = 32  # the matmul's size: small, but a real MXU/GEMM call


def _operands() -> tuple[Any, Any, Any]:
    """(A, B, A @ B): integers below 8, so every float32 product and sum is exact."""
    import numpy as np

    i, j = np.indices((_N, _N))
    a = ((i * 3 + j) % 7).astype(np.int64)
    b = ((i + 5 * j) % 5).astype(np.int64)
    return a.astype(np.float32), b.astype(np.float32), (a @ b).astype(np.float32)


def _product(x: Any, y: Any) -> Any:
    return x @ y


def _total(v: Any) -> Any:
    return v.sum()


def run_checks(devices: Sequence[Any], corrupt: bool = False) -> str | None:
    """The matmul on each device and the collective over all of them; None when both give the known
    result, else what went wrong. `corrupt`: the simulated backend's sick slice (`K@sick:S`), whose
    first device computes on a corrupted input row, as a device with a bad memory cell would."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    a, b, expected = _operands()
    matmul = jax.jit(_product)  # module-level functions: a check again (each poll of a sick slice) compiles nothing
    for n, device in enumerate(devices):
        left = a.copy()
        if corrupt and n == 0:
            left[0] += 1.0
        got = np.asarray(matmul(jax.device_put(left, device), jax.device_put(b, device)))
        wrong = int(np.count_nonzero(got != expected))
        if wrong:
            return f"matmul on device {device.id} gave a wrong result ({wrong} of {_N * _N} entries differ)"
    mesh = Mesh(np.array(list(devices), dtype=object), ("d",))
    values = np.arange(len(devices) * _N, dtype=np.float32)
    x = jax.device_put(values, NamedSharding(mesh, PartitionSpec("d")))
    total = jax.jit(_total, out_shardings=NamedSharding(mesh, PartitionSpec()))(x)
    want = float(values.sum())
    for shard in total.addressable_shards:
        got_sum = float(np.asarray(shard.data))
        if got_sum != want:
            return f"all-reduce over the slice's {len(devices)} devices gave {got_sum:g} on device " \
                   f"{shard.device.id}, expected {want:g}"
    return None


def within(seconds: float, check: Callable[[], str | None]) -> str | None:
    """`check()` under a timeout: its answer, or why it gave none (it raised, or did not finish)."""
    answer: list[str | None] = []

    def run() -> None:
        try:
            answer.append(check())
        except Exception as exc:  # noqa: BLE001 - a check that raises is a failed check, with its reason
            answer.append(f"the check raised: {(str(exc).splitlines() or [type(exc).__name__])[0][:200]}")

    thread = threading.Thread(target=run, name="elxpk-slice-health", daemon=True)
    thread.start()
    thread.join(seconds)
    if not answer:
        return f"the check did not finish within {seconds:g}s (a device or a collective hangs)"
    return answer[0]


class HealthChecked(Protocol):
    """What the gate needs of a slice backend (trainer.elastic.slices, which imports this module)."""

    def health_check(self, slice_index: int) -> str | None: ...


class RejoinGate:
    """Which returning slices may receive the state: each passes the backend's health check first."""

    def __init__(self, backend: HealthChecked, recorder: RunRecorder, clock: Clock, recheck_s: float,
                 timeout_s: float = CHECK_TIMEOUT_S) -> None:
        self._backend, self._recorder, self._clock = backend, recorder, clock
        self._recheck_s, self._timeout_s = recheck_s, timeout_s
        self._verdicts: dict[int, tuple[float, str | None]] = {}  # slice -> (when checked, why it failed)
        self._reported: dict[int, str] = {}  # slice -> the refusal last written as an event

    def admit(self, returning: Sequence[int], step: int) -> list[int]:
        """The returning slices that passed (now or within `recheck_s`); the others are still lost."""
        return [s for s in returning if self._verdict(s, step) is None]

    def refused(self) -> dict[int, str]:
        """Slices whose latest check failed, and why (the wait for slices names them when it times out)."""
        return {s: why for s, (_, why) in self._verdicts.items() if why is not None}

    def _verdict(self, s: int, step: int) -> str | None:
        now = self._clock.monotonic()
        kept = self._verdicts.get(s)
        if kept is not None and now - kept[0] < self._recheck_s:
            return kept[1]
        why = within(self._timeout_s, lambda: self._backend.health_check(s))
        self._verdicts[s] = (now, why)
        if why is None:
            self._reported.pop(s, None)
        elif self._reported.get(s) != why:
            self._reported[s] = why
            self._recorder.event("rejoin_refused", step, slices=[s], reason=why)
        return why


@dataclass
class Admission:
    """Which slices an attempt may use (trainer.elastic.policy.Admit): those of the previous attempt that
    did not fail keep their place; a slice that returns (lost, or left out) is admitted only past the gate."""

    gate: RejoinGate
    previous: Sequence[int]
    lost: Sequence[int]
    step: int

    def __call__(self, healthy: Sequence[int]) -> list[int]:
        returning = [s for s in healthy if s not in self.previous or s in self.lost]
        kept = [s for s in healthy if s not in returning]
        return sorted(kept + self.gate.admit(returning, self.step))

    def refused(self) -> dict[int, str]:
        return self.gate.refused()

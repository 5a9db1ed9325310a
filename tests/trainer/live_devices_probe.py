"""One process of the live_devices probe (tests/trainer/test_live_devices_cpu.py), run as a script.

argv: COORDINATOR PROCESS_ID NUM_PROCESSES HEARTBEAT_S DIE_AT_STEP DIE_WHERE
Each step is the loop of JAX's "Fault Tolerant Distributed JAX" page: inside `live_devices`, one
all-reduce over the live devices (one CPU device per process, gloo). DIE_WHERE says where the process
SIGKILLs itself at DIE_AT_STEP: "before" the step's collective (its peers are then inside a collective
with a dead process) or "after" it (its peers are between collectives); -1 never. Each event is one JSON
line on stdout, read by the test as it happens.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def main() -> None:
    coordinator, pid, n, heartbeat_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    die_at, die_where = int(sys.argv[5]), sys.argv[6]

    def log(**event: object) -> None:
        print(json.dumps({"pid": pid, **event}), flush=True)

    import jax

    jax.config.update("jax_enable_recoverability", True)
    jax.config.update("jax_num_cpu_devices", 1)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator, n, pid, heartbeat_timeout_seconds=heartbeat_s,
                               initialization_timeout=60, shutdown_timeout_seconds=5)
    import numpy as np
    from jax.experimental.multihost_utils import ProcessFailureError, live_devices
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    log(event="initialized")
    for step in range(1000):
        try:
            with live_devices(jax.devices()) as devices:
                log(event="live", step=step, live=sorted(d.process_index for d in devices))
                if step == die_at and die_where == "before":
                    os.kill(os.getpid(), signal.SIGKILL)
                mesh = Mesh(np.array(devices), ("x",))
                mine = [d for d in devices if d.process_index == pid]
                x = jax.make_array_from_single_device_arrays(
                    (len(devices),), NamedSharding(mesh, P("x")), [jax.device_put(np.array([step + 1.0]), d) for d in mine])
                total = jax.jit(lambda a: a.sum(), out_shardings=NamedSharding(mesh, P()))(x)
                log(event="done", step=step, sum=float(np.asarray(total.addressable_data(0))))
                if step == die_at and die_where == "after":
                    time.sleep(1.0)  # its peers leave the collective and reach the block's closing barrier first
                    os.kill(os.getpid(), signal.SIGKILL)
        except ProcessFailureError as e:
            log(event="failed", step=step, failed=sorted(d.process_index for d in e.failed_devices))
        except Exception as e:  # noqa: BLE001 - the probe reports whatever jax raises
            log(event="error", step=step, error=repr(e)[:300])
        time.sleep(0.2)


if __name__ == "__main__":
    main()

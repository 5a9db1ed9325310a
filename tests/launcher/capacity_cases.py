"""Golden inputs of the capacity modes (--spot, --flex-start, --reservation, --on-demand): argv after
`elxpk workload create`; each manifest lives in goldens/<name>.yaml. Kept apart from cases.py, whose
goldens the real control plane also runs to every pod Running: these select GKE node labels
(cloud.google.com/gke-spot, gke-queued, reservation-name) that the test cluster's nodes do not carry, so
tests/realcluster/test_capacity_real.py checks them by admission and by Kueue instead."""

from __future__ import annotations

from tests.launcher.cases import XPK_GOLDEN

CAPACITY_CASES: dict[str, list[str]] = {
    "capacity-spot-pathways-v5p-8": [*XPK_GOLDEN, "--command", "bash hello", "--tpu-type=v5p-8", "--spot"],
    "capacity-flex-start-v5litepod-16x2": [*XPK_GOLDEN, "--tpu-type=v5litepod-16", "--num-slices=2",
                                           "--no-pathways", "--command", "python3 train.py", "--flex-start",
                                           "--max-run-duration=24h"],
    "capacity-reservation-headless-v6e-16": [*XPK_GOLDEN, "--tpu-type=v6e-16", "--headless",
                                             "--reservation=projects/golden-project/reservations/golden-res"],
    "capacity-on-demand-v5p-8": [*XPK_GOLDEN, "--command", "bash hello", "--tpu-type=v5p-8", "--on-demand"],
    "capacity-spot-gpu-h100": [*XPK_GOLDEN, "--device-type=h100-80gb-8", "--num-nodes=2", "--command",
                               "nvidia-smi", "--spot"],
}

"""Process-wide test environment. Set before anything imports jax or google.auth.

- 4 virtual CPU devices = 2 simulated slices x 2 devices (the trainer's test topology).
- Short collective timeouts, so a CPU collective stall aborts in seconds, not minutes.
- NO_GCE_CHECK: google.auth must never probe the metadata server from a test.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault(
    "XLA_FLAGS",
    "--xla_force_host_platform_device_count=4"
    " --xla_cpu_collective_call_warn_stuck_timeout_seconds=10"
    " --xla_cpu_collective_call_terminate_timeout_seconds=30",
)
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["NO_GCE_CHECK"] = "true"
os.environ.setdefault("GCE_METADATA_HOST", "127.0.0.1:9")  # belt and braces: a closed loopback port
os.environ.pop("KUBECONFIG", None)

import pytest  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def crd_dir() -> Path:
    """The CRDs vendored in the package (elxpk/crds/), as `elxpk workload validate` reads them."""
    from elxpk.admission.schema import crds_dir

    return crds_dir()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite golden files (manifests, reports) from the current code instead of comparing",
    )


@pytest.fixture(scope="session")
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))

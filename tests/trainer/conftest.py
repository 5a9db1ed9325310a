# The fake API server and a kubeconfig for it: tests/trainer/test_badput_meter.py checks `workload status` and
# the alerts on a real run's progress record against `report` (a module's own `clock` fixture wins over this).
from tests.cluster.conftest import clock, fake, jobset_crd, k, kubeconfig  # noqa: F401
from tests.support.runs import (  # noqa: F401  (session fixtures shared with tests/local)
    pause_resume_run,
    reference_run,
    resize_run,
    save_kill_run,
)

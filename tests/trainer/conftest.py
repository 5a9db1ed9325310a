from tests.support.runs import (  # noqa: F401  (session fixtures shared with tests/local)
    pause_resume_run,
    reference_run,
    resize_run,
    save_kill_run,
)

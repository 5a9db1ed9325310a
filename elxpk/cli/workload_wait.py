"""`elxpk workload wait NAME`: until it completes (or runs). Exit 0 success, 1 failed, 124 past --timeout."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Annotated, Any

from elxpk.cli import options
from elxpk.cli.workload_common import connect, console, workload_name
from elxpk.cluster.verbs import verb_flags
from elxpk.output_formats import OUTPUT_ROWS
from elxpk.shown import shown

ROWS = (*verb_flags.WAIT, OUTPUT_ROWS["status"])  # what `wait` reads: its rows, then -o (verb_flags.WaitFlags)


@options.with_flags("wait", verb_flags.WAIT)
@options.with_cluster
def wait(
    name: Annotated[str, options.workload_argument("Workload name.")],
    flags: Mapping[str, Any] = options.NO_FLAGS,
    output: options.StatusOutput = "table",
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Wait until the workload completes (or runs). Exit 0 success, 1 failed, 124 timeout."""
    workload_name(name)
    # -o read with the other flags (its row, elxpk/output_formats.py): every problem at once
    values = verb_flags.read(verb_flags.WaitFlags, ROWS, {**flags, "output": output})
    output = values.output
    until = values.until
    kube, ns = connect(cluster)
    from rich.markup import escape

    from elxpk.cluster.verbs.ops import wait_for
    from elxpk.cluster.verbs.status_render import dump

    err = console(stderr=True)
    last: list[str] = []

    def show(status) -> None:
        # the message is the cluster's: one line, controls visible, and no Rich markup of its own
        line = escape(shown(f"{status.state}: {status.message} (slices {status.slices_healthy}/{status.slices_total})"))
        if spinner is not None:
            spinner.update(f"{name}: {line}")
        elif not last or last[-1] != line:
            err.print(f"{name}: {line}")
        last.append(line)

    spinner = err.status(f"waiting for {name} ({until})") if err.is_terminal else None
    try:
        if spinner is not None:
            spinner.start()
        result = wait_for(kube, ns, name, until=until, timeout_s=values.timeout, clock=time.time,
                          sleep=time.sleep, poll_s=values.poll, on_update=show)
    finally:
        if spinner is not None:
            spinner.stop()
    if output == "table":
        print(f"{name}: {result.state}")
    else:
        print(dump(result.to_dict(), output))

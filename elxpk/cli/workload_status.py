"""`elxpk workload status NAME`: elastic-aware state, once (-o table/json/yaml, --why) or live (--watch)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Annotated, Any

from elxpk import accelerators
from elxpk.cli import options
from elxpk.cli.workload_common import connect, console, workload_name
from elxpk.cluster.verbs import verb_flags
from elxpk.output_formats import OUTPUT_ROWS

FLAGS = verb_flags.STATUS + (accelerators.BY_NAME["chip_hour_price"],)
ROWS = (*FLAGS, OUTPUT_ROWS["status"])  # what `status` reads: its options, then -o (verb_flags.StatusFlags)


@options.with_flags("status", FLAGS)
@options.with_cluster
def status(
    name: Annotated[str, options.workload_argument()],
    output: options.StatusOutput = "table",
    flags: Mapping[str, Any] = options.NO_FLAGS,
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Elastic-aware state: slices healthy N/M, restart budgets, Kueue admission, chip-hours and money spent."""
    workload_name(name)
    output = output.lower()
    # -o read with the other flags (its row, elxpk/output_formats.py), in the lower case --watch's rule reads
    values = verb_flags.read(verb_flags.StatusFlags, ROWS, {**flags, "output": output},
                             verb_flags.status_rules(output))
    kube, ns = connect(cluster)
    from elxpk.cluster.records.chips import with_chip_hours
    from elxpk.cluster.verbs.observe import fetch_status
    from elxpk.cluster.verbs.status_render import dump, status_renderables, why_renderables

    def read(on_objects=None):
        # The ages are as of the reads' end, not their start (a read that rides out an API pause takes
        # minutes): fetch_status reads the clock once, and the chip-hours take that same time.
        read_at = [time.time()]

        def clock() -> float:
            read_at[0] = time.time()
            return read_at[0]

        found = fetch_status(kube, ns, name, now=read_at[0], with_progress=True, stuck_after_s=values.stuck_after,
                             why=values.why, on_objects=on_objects, clock=clock)
        return with_chip_hours(found, values.chip_hour_price, read_at[0])

    if values.watch:
        from elxpk.cli.status_watch_view import run_watch

        run_watch(kube, ns, name, read, json_out=output == "json")
        return
    result = read()
    if output == "table":
        shown = console()
        for renderable in status_renderables(result) + (why_renderables(result) if values.why else []):
            shown.print(renderable)
    else:
        print(dump(result.to_dict(), output))

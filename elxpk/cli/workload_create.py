"""`elxpk workload create` (alias `create-pathways`, and `job submit`): plan, then execute.

Thin on purpose: the flags are rows of elxpk/create/flags.py (its Typer options are generated from the
table); the plan (parse, check, build the spec, render, admit) is elxpk/create/pipeline.py, called once;
what is left here carries it out: write, print or submit (elxpk/cluster/verbs/submit.py). Integer flags are read
as text so that the spec reports every bad value at once. Only typer is imported at module level: `--dry-run` has a start-up budget. No
`from __future__ import annotations` here: Typer would eval every string annotation at start-up.
"""

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from elxpk.cli import options
from elxpk.shown import shown

if TYPE_CHECKING:  # an annotation only: the pipeline is imported when a command runs
    from elxpk.create.records import Plan


@options.with_cluster
@options.with_trainer_settings
@options.with_flags("create")
def create(
    flags: Mapping[str, Any] = options.NO_FLAGS,
    output: options.ManifestOutput = "yaml",
    settings: Mapping[str, str | None] = options.NO_SETTINGS,
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Render a Pathways JobSet (or, with --no-pathways, a multi-controller one), then print or submit it.

    Every flag is validated first; bad input exits 2 with one line per problem and writes nothing.
    gcluster's `job submit` spellings are accepted too; any of them brings gcluster's defaults and limits.
    """
    _create(flags, output, settings, cluster)


@options.with_gcluster_cluster
@options.with_trainer_settings
@options.with_flags("create", submit_shorts=True)
def submit(
    flags: Mapping[str, Any] = options.NO_FLAGS,
    output: options.SubmitManifestOutput = "yaml",
    settings: Mapping[str, str | None] = options.NO_SETTINGS,
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """`workload create` for gcluster's muscle memory: -n is --name and -o is --dry-run-out, as in
    `gcluster job submit` (--namespace and --output are long only here).

    Any gcluster spelling brings gcluster's defaults (--restarts 1, --grace-period 30s,
    --gke-ttl-after-finished 1h, a plain JobSet unless --pathways) and its name limits (28, 22 with
    --pathways). Bad input exits 2 with one line per problem and writes nothing.
    """
    _create(flags, output, settings, cluster)


def _create(flags: Mapping[str, Any], output: str, settings: Mapping[str, str | None],
            cluster: options.ClusterSelection) -> None:
    """Plan, then execute: every stage runs (elxpk/create/pipeline.py) before anything is written or sent."""
    from functools import partial

    from elxpk.create.pipeline import plan

    _execute(plan(flags, output, settings, cluster, note=partial(print, file=sys.stderr)), cluster)


def _execute(plan: "Plan", cluster: options.ClusterSelection) -> None:
    """The plan carried out: the manifest written, printed or submitted (then waited for, in gcluster's
    spelling with --await-job-completion)."""
    spec, run, dialect, target, manifest, text = plan.spec, plan.run, plan.dialect, plan.target, plan.manifest, plan.text
    if run.output_manifest_file:
        from elxpk.outfile import write_text

        write_text(run.output_manifest_file, text,
                   flag="--output-manifest-file" if dialect.print_manifest else "--dry-run-out")
        print(f"wrote {run.output_manifest_file}", file=sys.stderr)
    _checkpoint_hint(spec, run)
    if run.dry_run == "client":
        if dialect.print_manifest:
            sys.stdout.write(text)
        return

    from elxpk.cluster.verbs import submit as submission

    created = submission.submit(manifest, target, server_dry_run=run.dry_run == "server", replace=run.replace)
    suffix = " (server dry run)" if run.dry_run == "server" else ""
    for obj in created:
        kind, name = obj.get("kind", "object"), obj.get("metadata", {}).get("name", "?")
        print(shown(f"{str(kind).lower()}/{name} created{suffix}"))  # the server's answer: controls shown
    if not run.dry_run:
        for line in submission.follow_up_commands(spec.workload, target):
            print(f"  {line}", file=sys.stderr)
    if dialect.await_completion and not run.dry_run:
        import inspect

        from elxpk.cli.workload_wait import wait

        # `workload wait NAME --for completed`: exit 0 succeeded, 1 failed, 124 past --timeout. Unwrapped: the
        # verb itself, which takes its flags as typed text (options.with_flags) and a ClusterSelection.
        inspect.unwrap(wait)(spec.workload, flags={"until": "completed", "timeout": dialect.timeout},
                             output="table", cluster=cluster._replace(namespace=target.namespace))


def _checkpoint_hint(spec, run) -> None:
    """The planner's checkpoint_period hint, when --slice-mtbf and a step time (--step-time or --from-run)
    are given; with the save and replacement times when known."""
    if run.slice_mtbf_seconds is None or run.step_time_seconds is None:
        return
    from types import SimpleNamespace

    from elxpk.plan.hint import checkpoint_period_hint

    times = run.times
    line = checkpoint_period_hint(SimpleNamespace(
        checkpoint_period=dict(spec.settings).get("checkpoint_period"), num_slices=spec.num_slices,
        slice_mtbf_seconds=run.slice_mtbf_seconds, step_time_seconds=run.step_time_seconds,
        checkpoint_save_seconds=times.save_s if times else None,
        replacement_seconds=times.replacement_s if times else None,
        restore_seconds=times.restore_s if times else None))
    if line:
        print(line, file=sys.stderr)

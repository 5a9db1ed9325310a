"""`elxpk workload create` (alias `create-pathways`): flags → WorkloadSpec → render → print, write or submit.

Thin on purpose: the flags are rows of elxpk/create/flags.py (its Typer options are generated from the
table), validation lives in elxpk/create/spec.py, rendering in elxpk/create/render.py, submission in
elxpk/cluster/submit.py. Integer flags are read as text so that the spec reports every bad value at
once. Only typer is imported at module level: `--dry-run` has a start-up budget. No
`from __future__ import annotations` here: Typer would eval every string annotation at start-up.
"""

import sys
from collections.abc import Mapping
from typing import Any

from elxpk.cli import options
from elxpk.shown import shown


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
    spec, run, warnings, dialect, target = checked(flags, output, settings, cluster)
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    if flags["check_data"]:
        _check_data(spec.command)
    if flags["check_fit"]:
        from elxpk.create.fit_check import check_fit
        from elxpk.create.render import trainer_env

        for line in check_fit(spec, trainer_env(spec)):
            print(line, file=sys.stderr)
    _render_and_send(spec, run, dialect, target, cluster)


def checked(flags: Mapping[str, Any], output: str, settings: Mapping[str, str | None],
            cluster: options.ClusterSelection, *, offline: bool = False) -> tuple[Any, Any, Any, Any, Any]:
    """Every flag checked, before any I/O: (spec, run, warnings, dialect, target), or UsageError with one
    line per problem. `elxpk translate` refuses with these lines what the command it prints would refuse
    (`offline`: no cluster selection needed, the printed command may run elsewhere)."""
    from elxpk.create.checks import parse_create
    from elxpk.create.dialect import resolve, respell
    from elxpk.create.flags import COMMAND_CHECKS
    from elxpk.errors import UsageError

    # gcluster's spellings into elxpk's rows first (elxpk/create/dialect.py); its problems are reported
    # with every other.
    given, (flags, dialect, dialect_problems) = flags, resolve(flags, namespace_given=cluster.namespace is not None)
    if dialect.namespace is not None and cluster.namespace is None:
        cluster = cluster._replace(namespace=dialect.namespace)
    # The one target resolution of every verb: flags, then ELXPK_* and the config file (the namespace too).
    # A client-side dry run sends nothing, so it needs no complete cluster selection. Its problems are
    # reported with those of the other flags.
    try:
        target, target_problems = cluster.resolve(require_cluster=not (flags["dry_run"] or offline)), []
    except UsageError as exc:
        target, target_problems = cluster.resolve(require_cluster=False), exc.messages
    try:
        spec, run, warnings = parse_create(**{k: v for k, v in flags.items() if k not in COMMAND_CHECKS},
                                           namespace=target.namespace, output_format=output, **settings)
    except UsageError as exc:
        raise UsageError(*dialect_problems, *respell(exc.messages, given), *target_problems) from None
    if dialect_problems or target_problems:
        raise UsageError(*dialect_problems, *target_problems)
    return spec, run, warnings, dialect, target


def _render_and_send(spec: Any, run: Any, dialect: Any, target: Any, cluster: options.ClusterSelection) -> None:
    from elxpk.create.render import render

    manifest = render(spec)
    _check_sizes(manifest)
    text = manifest.dump(run.output_format)
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

    from elxpk.cluster import submit as submission

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


def _check_sizes(manifest) -> None:
    """Each object within the API server's size limit (elxpk/admission/object_size.py), before anything
    is printed, written or sent."""
    from elxpk.admission.object_size import largest_env, size_problem
    from elxpk.errors import UsageError

    for obj in manifest.objects:
        problem = size_problem(obj)
        if problem:
            env = largest_env(obj)
            culprit = f"; the largest --env value is {env[0]} ({env[1] // 1024} KiB)" if env else ""
            raise UsageError(f"the rendered {obj.get('kind', 'object')} {problem}: shorten the --env values or "
                             f"--command, or pass large data through a file or bucket{culprit}")


def _check_data(command: str | None) -> None:
    """--check-data: the data MaxText will read is ArrayRecord with records; else exit 2, nothing written."""
    from elxpk.errors import UsageError
    from elxpk.maxtext.data_check import check_commands

    problems, checked = check_commands([command] if command else [])
    if problems:
        raise UsageError(*problems)
    if not checked:
        print("warning: --check-data: --command reads no grain_train_files with dataset_type=grain; nothing to "
              "check", file=sys.stderr)


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

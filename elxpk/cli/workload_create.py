"""`elxpk workload create` (alias `create-pathways`): flags → WorkloadSpec → render → print, write or submit.

Thin on purpose: validation lives in elxpk/create/spec.py, rendering in elxpk/create/render.py, submission in
elxpk/cluster/submit.py. Integer flags are read as text so that the spec reports every bad value at
once. Only typer is imported at module level: `--dry-run` has a start-up budget. No
`from __future__ import annotations` here: Typer would eval every string annotation at start-up.
"""

import sys
from collections.abc import Mapping
from typing import Annotated

import typer

from elxpk.cli import options

_ELASTIC_HELP = (
    "Slices Pathways may lose without failing the program (server-side tolerance), passed to the proxy as "
    "--num_elastic_slices. 0 disables elasticity; must be below --num-slices. Not the same knob as "
    "--elastic-min-slice-count (the trainer's side; with Pathways at least num_slices - elastic_slices)."
)
_PANEL_PATHWAYS = "Pathways"


def _int_opt(*names: str, help: str, panel: str | None = None) -> typer.models.OptionInfo:
    return typer.Option(*names, metavar="INT", help=help, rich_help_panel=panel)


@options.with_cluster
@options.with_trainer_settings
def create(
    workload: Annotated[str | None, typer.Option("--workload", help="JobSet name: a-z, 0-9, '-', starting with a letter; at most 39 characters for Pathways (the limit of each shape is checked).")] = None,
    tpu_type: Annotated[str | None, typer.Option("--tpu-type", help="TPU slice type, e.g. v5p-8, v5p-2x2x2, v5litepod-16, v6e-16, tpu7x-8.")] = None,
    num_slices: Annotated[str | None, _int_opt("--num-slices", help="Number of TPU slices (worker replicas). Default: 1.")] = None,
    device_type: Annotated[str | None, typer.Option("--device-type", help="GPU machine instead of --tpu-type, as in xpk: h100-80gb-8 (A3 High), h100-mega-80gb-8 (A3 Mega), h200-141gb-8 (A3 Ultra), b200-8 (A4), or the GCE machine type. A multi-controller JobSet with the machine's GPUDirect networking (docs/gpu.md).")] = None,
    num_nodes: Annotated[str | None, _int_opt("--num-nodes", help="GPU machines in the node group (pods, 8 GPUs each); with --device-type. Default: 1.")] = None,
    command: Annotated[str | None, typer.Option("--command", help="Shell command the user container runs; required unless --headless or --trainer (elxpk), where it holds extra trainer arguments. With --trainer maxtext: the MaxText command.")] = None,
    docker_image: Annotated[str | None, typer.Option("--docker-image", help="Image of the user container. Default: python:3.10.")] = None,
    docker_name: Annotated[str | None, typer.Option("--docker-name", help="Name of the user container. Default: jax-tpu.")] = None,
    trainer: Annotated[str | None, typer.Option("--trainer", metavar="[elxpk|maxtext]", help="Which trainer the user container runs. --trainer (or --trainer elxpk): the bundled trainer (python -m trainer; needs --docker-image built from trainer/Dockerfile). --trainer maxtext: --command runs MaxText, and the trainer settings become MaxText key=value overrides after its config file (docs/maxtext.md).")] = None,
    no_pathways: Annotated[bool, typer.Option("--no-pathways", help="Multi-controller JobSet: the command runs on every VM of every slice; failures restart the whole group (--max-restarts).")] = False,
    headless: Annotated[bool, typer.Option("--headless", help="Pathways without a user container: proxy and resource manager only; connect your own client.", rich_help_panel=_PANEL_PATHWAYS)] = False,
    elastic_slices: Annotated[str | None, _int_opt("--elastic-slices", help=_ELASTIC_HELP + " Default: 0.", panel=_PANEL_PATHWAYS)] = None,
    max_slice_restarts: Annotated[str | None, _int_opt("--max-slice-restarts", help="Pod restarts each slice may use when elastic: worker backoffLimit = this x VMs per slice (else 4 x VMs per slice), as in xpk. Default: 1.", panel=_PANEL_PATHWAYS)] = None,
    max_restarts: Annotated[str | None, _int_opt("--max-restarts", help="Whole-JobSet restarts (failurePolicy.maxRestarts), honoured for Pathways too. Default: 0.")] = None,
    restart_on_exit_codes: Annotated[str | None, typer.Option("--restart-on-exit-codes", metavar="CODES", help="As in xpk: comma-separated exit codes or ranges (e.g. 1,75-77) of the user container that restart the workload (counted against the budgets) instead of failing it at once; every other code except xpk's (42, 127-255) and the trainer's retryable ones then fails it. See docs/launcher.md.")] = None,
    priority: Annotated[str | None, typer.Option("--priority", help="PriorityClass: very-low, low, medium, high, very-high. Default: medium.")] = None,
    queue: Annotated[str | None, typer.Option("--queue", help="Kueue LocalQueue (label kueue.x-k8s.io/queue-name). Default: multislice-queue.")] = None,
    termination_grace_period_seconds: Annotated[str | None, _int_opt("--termination-grace-period-seconds", help="Seconds a pod gets after SIGTERM. Default: 30.")] = None,
    ttl_seconds_after_finished: Annotated[str | None, _int_opt("--ttl-seconds-after-finished", help="Seconds a finished JobSet is kept. Default: 43200.")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", metavar="KEY=VALUE", help="Env var for the training container; repeatable; overrides --env-file.")] = None,
    env_file: Annotated[str | None, typer.Option("--env-file", help="File of KEY=VALUE lines ('#' comments allowed).")] = None,
    proxy_server_image: Annotated[str | None, typer.Option("--proxy-server-image", help="Pathways proxy image.", rich_help_panel=_PANEL_PATHWAYS)] = None,
    server_image: Annotated[str | None, typer.Option("--server-image", help="Pathways resource manager image (and worker image unless --worker-image).", rich_help_panel=_PANEL_PATHWAYS)] = None,
    worker_image: Annotated[str | None, typer.Option("--worker-image", help="Pathways worker image. Default: --server-image.", rich_help_panel=_PANEL_PATHWAYS)] = None,
    pathways_gcs_location: Annotated[str | None, typer.Option("--pathways-gcs-location", help="gs:// scratch location for proxy, resource manager and workers.", rich_help_panel=_PANEL_PATHWAYS)] = None,
    custom_proxy_server_args: Annotated[str | None, typer.Option("--custom-pathways-proxy-server-args", help="Extra proxy args, split like a shell.", rich_help_panel=_PANEL_PATHWAYS)] = None,
    custom_server_args: Annotated[str | None, typer.Option("--custom-pathways-server-args", help="Extra resource manager args, split like a shell.", rich_help_panel=_PANEL_PATHWAYS)] = None,
    custom_worker_args: Annotated[str | None, typer.Option("--custom-pathways-worker-args", help="Extra worker args, split like a shell.", rich_help_panel=_PANEL_PATHWAYS)] = None,
    slice_mtbf: Annotated[str | None, typer.Option("--slice-mtbf", metavar="DURATION", help="Mean time between slice failures (e.g. 3d); with --step-time, prints a checkpoint_period hint.", rich_help_panel=options.TRAINER_PANEL)] = None,
    step_time: Annotated[str | None, typer.Option("--step-time", metavar="DURATION", help="Seconds per training step (e.g. 1.5s): checked against --stall-timeout-seconds; with --slice-mtbf, prints a checkpoint_period hint.", rich_help_panel=options.TRAINER_PANEL)] = None,
    checkpoint_save_time: Annotated[str | None, typer.Option("--checkpoint-save-time", metavar="DURATION", help="How long a checkpoint save blocks (e.g. 45s): checked against --termination-grace-period-seconds and --stall-timeout-seconds, and used by the checkpoint_period hint.", rich_help_panel=options.TRAINER_PANEL)] = None,
    slice_replacement_time: Annotated[str | None, typer.Option("--slice-replacement-time", metavar="DURATION", help="How long a lost slice takes to come back (e.g. 12m): checked against --elastic-timeout-seconds, and used by the checkpoint_period hint.", rich_help_panel=options.TRAINER_PANEL)] = None,
    from_run: Annotated[str | None, typer.Option("--from-run", metavar="RUN_DIR", help="A run directory whose measured step, save and replacement times stand in for --step-time, --checkpoint-save-time and --slice-replacement-time (each flag given wins).", rich_help_panel=options.TRAINER_PANEL)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print only the manifest on stdout; no cluster, no credentials, no network.", rich_help_panel=options.OUTPUT_PANEL)] = False,
    dry_run_server: Annotated[bool, typer.Option("--dry-run-server", help="Send to the cluster as a server-side dry run (admission and schema checks, nothing created).", rich_help_panel=options.OUTPUT_PANEL)] = False,
    replace: Annotated[bool, typer.Option("--replace", help="Delete a workload of the same name first.", rich_help_panel=options.OUTPUT_PANEL)] = False,
    check_data: Annotated[bool, typer.Option("--check-data", help="Read the MaxText command's grain_train_files (a local or gs:// pattern; bounded reads) and confirm it is ArrayRecord holding records. A network read: off unless given.", rich_help_panel=options.TRAINER_PANEL)] = False,
    output_manifest_file: Annotated[str | None, typer.Option("--output-manifest-file", help="Also write the manifest to this file (with or without --dry-run).", rich_help_panel=options.OUTPUT_PANEL)] = None,
    output: options.ManifestOutput = "yaml",
    settings: Mapping[str, str | None] = options.NO_SETTINGS,
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Render a Pathways JobSet (or, with --no-pathways, a multi-controller one), then print or submit it.

    Every flag is validated first; bad input exits 2 with one line per problem and writes nothing.
    """
    from elxpk.create.spec import parse_create
    from elxpk.errors import UsageError

    # The one target resolution of every verb: flags, then ELXPK_* and the config file (the namespace too).
    # A client-side dry run sends nothing, so it needs no complete cluster selection. Its problems are
    # reported with those of the other flags.
    try:
        target, target_problems = cluster.resolve(require_cluster=not dry_run), []
    except UsageError as exc:
        target, target_problems = cluster.resolve(require_cluster=False), exc.messages
    try:
        spec, run = parse_create(
            workload=workload, tpu_type=tpu_type, num_slices=num_slices, device_type=device_type, num_nodes=num_nodes,
            command=command, docker_image=docker_image,
            docker_name=docker_name, trainer=trainer, no_pathways=no_pathways, headless=headless,
            elastic_slices=elastic_slices, max_slice_restarts=max_slice_restarts, max_restarts=max_restarts,
            restart_on_exit_codes=restart_on_exit_codes, priority=priority, queue=queue, namespace=target.namespace,
            termination_grace_period_seconds=termination_grace_period_seconds,
            ttl_seconds_after_finished=ttl_seconds_after_finished, env=env, env_file=env_file,
            proxy_server_image=proxy_server_image, server_image=server_image, worker_image=worker_image,
            pathways_gcs_location=pathways_gcs_location, custom_proxy_server_args=custom_proxy_server_args,
            custom_server_args=custom_server_args, custom_worker_args=custom_worker_args,
            slice_mtbf=slice_mtbf, step_time=step_time, checkpoint_save_time=checkpoint_save_time,
            slice_replacement_time=slice_replacement_time, from_run=from_run, dry_run=dry_run, dry_run_server=dry_run_server,
            replace=replace, output_format=output, output_manifest_file=output_manifest_file, **settings,
        )
    except UsageError as exc:
        raise UsageError(*exc.messages, *target_problems) from None
    if target_problems:
        raise UsageError(*target_problems)
    for line in spec.warnings:
        print(f"warning: {line}", file=sys.stderr)
    if check_data:
        _check_data(spec.command)

    from elxpk.create.render import render

    manifest = render(spec)
    _check_sizes(manifest)
    text = manifest.dump(run.output_format)
    if run.output_manifest_file:
        from elxpk.outfile import write_text

        write_text(run.output_manifest_file, text, flag="--output-manifest-file")
        print(f"wrote {run.output_manifest_file}", file=sys.stderr)
    _checkpoint_hint(spec, run)
    if run.dry_run == "client":
        sys.stdout.write(text)
        return

    from elxpk.cluster import submit as submission

    created = submission.submit(manifest, target, server_dry_run=run.dry_run == "server", replace=run.replace)
    suffix = " (server dry run)" if run.dry_run == "server" else ""
    for obj in created:
        kind, name = obj.get("kind", "object"), obj.get("metadata", {}).get("name", "?")
        print(f"{kind.lower()}/{name} created{suffix}")
    if not run.dry_run:
        for line in submission.follow_up_commands(spec.workload, target):
            print(f"  {line}", file=sys.stderr)


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

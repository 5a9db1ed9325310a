"""`workload create` in one pass: `plan` runs every stage before anything is printed, written or sent, and
the CLI executes the plan (elxpk/cli/workload_create.py), as TorchX's `submit = schedule(dryrun(...))`.

The stages, in order, each called once and from here only:
1. parse: gcluster's spellings into elxpk's rows (elxpk/create/dialect.py), and the cluster target;
2. check: every flag rule at once, then the spec is built (elxpk/create/checks.py); then the checks that
   need the spec and were asked for (--check-data, --check-fit);
3. render: the manifest from the spec (elxpk/create/render.py `draft`);
4. admit: what the cluster would refuse of it (elxpk/create/admit.py), then what the bundled trainer it runs
   would refuse at its start, on those slices (elxpk/create/trainer_refusals.py: the global batch over the
   devices, and every other check of the trainer's settings).
A problem in parse or check is one UsageError line among all the others, so they are reported together.
`elxpk translate` runs stages 1 and 2 (`checked`) to refuse what the command it prints would refuse.

The cluster selection comes duck-typed (elxpk.cli.options.ClusterSelection: `namespace`, `_replace`,
`resolve`): elxpk.create imports nothing of elxpk.cli. What the stages say on the way (the warnings,
--check-fit's verdict) goes to `note`, in the order found, so it is printed before a later stage's refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from elxpk.create.checks import check_create
from elxpk.create.dialect import resolve
from elxpk.create.manifest import Manifest
from elxpk.create.records import Checked, CreateFlags, Parsed, Plan
from elxpk.create.spec import WorkloadSpec
from elxpk.errors import UsageError
from elxpk_contract.spelling import spoken_as

# What passes between the stages and to the CLI are named records (elxpk/create/records.py): Parsed,
# Checked, Plan.


def plan(flags: Mapping[str, Any], output: str, settings: Mapping[str, str | None], cluster: Any,
         note: Callable[[str], None]) -> Plan:
    """Every stage, in order; UsageError (exit 2, nothing written) at the first stage that refuses."""
    done = checked(flags, output, settings, cluster)
    spec, options, warnings = done.created
    for line in warnings:
        note(f"warning: {line}")
    _command_checks(spec, done.flags, note)
    from elxpk.create.admit import admit  # lazy: `elxpk translate` (checked) renders nothing
    from elxpk.create.render import draft  # lazy: likewise

    manifest = admit(draft(spec))
    _trainer_checks(manifest, spec, done.flags, note)
    return Plan(spec, options, done.dialect, done.target, manifest, manifest.dump(options.output_format))


def checked(flags: Mapping[str, Any], output: str, settings: Mapping[str, str | None], cluster: Any, *,
            offline: bool = False) -> Checked:
    """Stages 1 and 2: every flag checked, before any I/O, or UsageError with one line per problem
    (`offline`: no cluster selection needed, as for the command `elxpk translate` prints)."""
    return _check(_parse(flags, cluster, offline=offline), output, settings)


def _parse(flags: Mapping[str, Any], cluster: Any, *, offline: bool) -> Parsed:
    """gcluster's spellings into elxpk's rows first (elxpk/create/dialect.py), then the one target
    resolution of every verb: flags, then ELXPK_* and the config file (the namespace too). A client-side
    dry run sends nothing, so it needs no complete cluster selection."""
    given, dialect, dialect_problems = resolve(flags, namespace_given=cluster.namespace is not None)
    if dialect.namespace is not None and cluster.namespace is None:
        cluster = cluster._replace(namespace=dialect.namespace)
    # --dry-run as typed (a BOOL row reads as itself): the check stage, which reads it, comes after the target
    dry_run = bool(given.get("dry_run"))
    try:
        target, target_problems = cluster.resolve(require_cluster=not (dry_run or offline)), []
    except UsageError as exc:
        target, target_problems = cluster.resolve(require_cluster=False), exc.messages
    return Parsed(given, dialect, target, dialect_problems, target_problems)


def _check(parsed: Parsed, output: str, settings: Mapping[str, str | None]) -> Checked:
    """Every rule of elxpk/create/checks.py over the parsed flags, then the spec; the parse's problems are
    reported with the check's, in one UsageError, each naming its flags as the command typed them."""
    dialect, target, dialect_problems, target_problems = (
        parsed.dialect, parsed.target, parsed.dialect_problems, parsed.target_problems)
    given = {**parsed.given, "namespace": target.namespace, "output_format": output, **settings}
    try:  # the messages name each flag as the command spells it (gcluster's --restarts: dialect.spoken)
        with spoken_as(dialect.spoken):
            created, flags = check_create(given)
    except UsageError as exc:
        raise UsageError(*dialect_problems, *exc.messages, *target_problems) from None
    if dialect_problems or target_problems:
        raise UsageError(*dialect_problems, *target_problems)
    return Checked(created, flags, dialect, target)


def _command_checks(spec: WorkloadSpec, flags: CreateFlags, note: Callable[[str], None]) -> None:
    """--check-data and --check-fit, the checks that need the spec and were asked for; UsageError when one
    fails."""
    if flags.check_data:
        _check_data(spec.command, note)
    if flags.check_fit:
        from elxpk.create.fit_check import check_fit  # lazy: subprocess and a compile, only when asked
        from elxpk.create.render import trainer_env  # lazy: as `plan`'s

        for line in check_fit(spec, trainer_env(spec), note):
            note(line)


def _trainer_checks(manifest: Manifest, spec: WorkloadSpec, flags: CreateFlags,
                    note: Callable[[str], None]) -> None:
    """What the trainer of the rendered JobSet would refuse when it starts (UsageError, exit 2), and a hint
    when its memory was not checked: only --check-fit compiles the step (minutes), so only it says that
    the step fits the chip."""
    from elxpk.create.trainer_refusals import jobset_trainer_problems  # lazy: argparse, only for a trainer

    problems = [line for obj in manifest.objects for line in jobset_trainer_problems(obj)]
    if problems:
        raise UsageError(*problems)
    if spec.trainer and spec.tpu is not None and not flags.check_fit:
        note(f"hint: whether the train step fits {spec.tpu.name}'s memory was not checked; add --check-fit to "
             f"compile it for {spec.tpu.jax_topology} first (minutes of CPU; libtpu: elxpk[tpu])")


def _check_data(command: str | None, note: Callable[[str], None]) -> None:
    """--check-data: the data MaxText will read is ArrayRecord with records; else UsageError."""
    from elxpk.maxtext.data_check import check_commands  # lazy: only --check-data reads the data

    problems, checked_files = check_commands([command] if command else [])
    if problems:
        raise UsageError(*problems)
    if not checked_files:
        note("warning: --check-data: --command reads no grain_train_files with dataset_type=grain; nothing to "
             "check")

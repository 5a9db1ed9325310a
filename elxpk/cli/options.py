"""Typer options made from flag rows (elxpk/flag_rows.py), and the rows the commands share: cluster selection
(`CLUSTER_FLAGS`) and `-o/--output`.

Three decorators add a block of rows to a command's signature, so each flag is declared once, as a row:
`with_flags` turns a command's table into one `flags: dict[name, value]` argument, `with_cluster` the seven
cluster rows into one `cluster: ClusterSelection`, and `with_trainer_settings` the rows of every setting the
contract exposes to the launcher (elxpk/create/flags.py TRAINER_SETTINGS) into one `settings: dict[name, raw
text]`. Typer reads a function's `__signature__`, which all three set.
Nothing heavy is imported here: `workload create --dry-run` has a start-up budget.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Annotated, Any, NamedTuple

import typer

from elxpk import flag_rows
from elxpk.cli import completion
from elxpk.create import flags as flag_table
from elxpk.flag_rows import Flag
from elxpk.output_formats import OUTPUT_ROWS

CLUSTER_PANEL = "Cluster selection"
TRAINER_PANEL = flag_table.TRAINER
OUTPUT_PANEL = flag_table.OUTPUT


def _option(*names: str, help: str, panel: str | None = None, metavar: str | None = None,
            complete: Callable[..., Any] | None = None) -> Any:
    return typer.Option(*names, help=help, rich_help_panel=panel, metavar=metavar, autocompletion=complete)


def output_option(kind: str, panel: str | None = None, *, short: bool = True) -> Any:
    """The `-o/--output` option type of one kind of command, from its row (elxpk/output_formats.py
    OUTPUT_ROWS, read by `Flag.read` with the command's other flags); `short=False`: `--output` alone (`job
    submit`, where -o is gcluster's --dry-run-out)."""
    row = OUTPUT_ROWS[kind]
    names = (row.flag, row.short) if short else (row.flag,)
    return Annotated[str, _option(*names, help=row.help, panel=panel, metavar=row.metavar,
                                  complete=completion.choices(row.choices))]


def workload_argument(help: str = "Workload (JobSet) name.") -> Any:
    """The NAME argument of a workload verb; Tab completes it with the cluster's workloads (bounded)."""
    return typer.Argument(metavar="NAME", help=help, autocompletion=_complete_workloads)


def _complete_workloads(ctx: typer.Context, incomplete: str) -> list[str]:
    """Workload names from the cluster that the cluster flags typed so far select."""
    params = ctx.params or {}
    return completion.workload_names(
        lambda: ClusterSelection(**{row.name: params.get(row.name) for row in CLUSTER_FLAGS}).resolve(), incomplete)


ManifestOutput = output_option("manifest", OUTPUT_PANEL)
SubmitManifestOutput = output_option("manifest", OUTPUT_PANEL, short=False)
StatusOutput = output_option("status")
RunOutput = output_option("run")
PlanOutput = output_option("plan")

_TEXT = str | None
_NAMESPACE_HELP = "Kubernetes namespace [env ELXPK_NAMESPACE, then the config file, else default]."
_VERBS = ("every verb that reaches a cluster",)
# The cluster-selection flags, declared once as rows; every verb gets all of them in the same panel.
CLUSTER_FLAGS: tuple[Flag, ...] = tuple(
    Flag(name, flag_rows.TEXT, help, panel=CLUSTER_PANEL, commands=_VERBS, short=short) for name, help, short in (
        ("project", "GCP project of the GKE cluster [env ELXPK_PROJECT].", ""),
        ("zone", "Zone of a zonal GKE cluster [env ELXPK_ZONE].", ""),
        ("region", "Region of a regional GKE cluster [env ELXPK_REGION].", ""),
        ("cluster", "GKE cluster name [env ELXPK_CLUSTER].", ""),
        ("kubeconfig", "Use this kubeconfig instead of a GKE lookup (read only, never written).", ""),
        ("context", "kubeconfig context to use.", ""),
        ("namespace", _NAMESPACE_HELP, "-n"),
    ))
# `job submit` speaks gcluster, whose -n is --name and -o is --dry-run-out: there --namespace and --output
# are long only.
SUBMIT_CLUSTER_FLAGS = CLUSTER_FLAGS[:-1] + (CLUSTER_FLAGS[-1]._replace(short=""),)


class ClusterSelection(NamedTuple):
    """The cluster flags as given (None = not given); `resolve` fills the gaps from ELXPK_* and the config."""

    project: str | None = None
    zone: str | None = None
    region: str | None = None
    cluster: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None

    def resolve(self, *, require_cluster: bool = True) -> Any:
        """The ClusterTarget after elxpk.cluster.access.defaults.resolve_target, the one resolution every verb uses.

        `require_cluster=False` (a client-side dry run) fills what the environment and config file give,
        the namespace above all, without asking for a complete cluster selection.
        """
        from elxpk.cluster.access.defaults import resolve_target
        from elxpk.cluster.access.target import DEFAULT_NAMESPACE, ClusterTarget

        target = ClusterTarget(project=self.project, location=self.zone or self.region, cluster=self.cluster,
                               kubeconfig=self.kubeconfig, context=self.context,
                               namespace=self.namespace or DEFAULT_NAMESPACE)
        return resolve_target(target, namespace_given=self.namespace is not None, require_cluster=require_cluster)


NO_CLUSTER_FLAGS = ClusterSelection()  # the placeholder default of a `cluster` parameter (with_cluster fills it)
NO_SETTINGS: Mapping[str, str | None] = MappingProxyType({})  # likewise for `settings`
NO_FLAGS: Mapping[str, Any] = MappingProxyType({})  # likewise for `flags` (with_flags)


def _extend_signature(func: Callable[..., Any], drop: str, added: list[inspect.Parameter],
                      pack: Callable[[dict[str, Any]], Any]) -> Callable[..., Any]:
    """`func` with parameter `drop` replaced by `added` (keyword-only, in its place); `pack` turns their
    values into it."""
    signature = inspect.signature(func, eval_str=True)
    names = [p.name for p in added]
    at = list(signature.parameters).index(drop)  # the added flags take its place in --help's order
    kept = [p for p in signature.parameters.values() if p.name != drop]

    @functools.wraps(func)
    def command(**kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in names}
        return func(**kwargs, **{drop: pack(values)})

    params = kept[:at] + added + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in kept[at:]]
    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    # Typer reads each type from __signature__ (evaluated above) and uses get_type_hints only for a type it
    # lacks there: no annotations spare it a walk over every Annotated option, twice a start.
    command.__annotations__ = {}
    return command


def with_cluster(func: Callable[..., Any], flags: tuple[Flag, ...] | None = None) -> Callable[..., Any]:
    """Give a command the cluster flags (`flags`: SUBMIT_CLUSTER_FLAGS for `job submit`); it receives them as
    `cluster: ClusterSelection`."""
    added = [_parameter(row, row.name, (row.flag, row.short) if row.short else (row.flag,), row.help, row.panel)
             for row in (flags or CLUSTER_FLAGS)]
    return _extend_signature(func, "cluster", added, lambda values: ClusterSelection(**values))


def with_gcluster_cluster(func: Callable[..., Any]) -> Callable[..., Any]:
    """`with_cluster` for gcluster's verbs (`job submit`, `job inspect`), whose -n is the workload's name:
    --namespace is long only there."""
    return with_cluster(func, SUBMIT_CLUSTER_FLAGS)


def trainer_setting_parameters() -> list[inspect.Parameter]:
    """One `--flag` per setting the contract exposes to the launcher: its row (elxpk/create/flags.py
    TRAINER_SETTINGS; help, name and bounds from the contract table).

    Values arrive as typed text, so `check_setting` reports every bad one together with the other problems.
    """
    return [_parameter(row, row.name, (row.flag,), row.full_help(), row.panel) for row in flag_table.TRAINER_SETTINGS]


def with_trainer_settings(func: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command the trainer-setting flags; it receives them as `settings: {name: text or None}`."""
    return _extend_signature(func, "settings", trainer_setting_parameters(), dict)


_METAVARS = {flag_rows.INT: "INT", flag_rows.FLOAT: "NUMBER", flag_rows.DURATION: "DURATION",
             flag_rows.SIZE: "SIZE"}


def flag_parameters(command: str, rows: tuple[Flag, ...] | None = None, *,
                    submit_shorts: bool = False) -> list[inspect.Parameter]:
    """One Typer option per row that `command` takes: of `rows` (a stage's table, e.g. elxpk/plan/flags.py),
    else of the launcher's flag table (elxpk/create/flags.py); and one per alias of a row (gcluster's
    spelling: its own option, so the command knows which spelling was used), in the gcluster panel.
    `submit_shorts`: the aliases' gcluster short forms that elxpk's -n/-o would take (`job submit`).

    Numbers arrive as typed text (the command's checks report every bad one together with the other
    problems); switches default to False (a two-way switch, `--live/--plain`, to None), repeatable flags
    to None.
    """
    params = []
    aliases = []
    for row in flag_table.of_command(command) if rows is None else rows:
        names: tuple[str, ...] = (f"{row.flag}/{row.off_flag}",) if row.off_flag else (row.flag,)
        names += (row.short,) if row.short else ()
        if submit_shorts and row.submit_short:
            names += (row.submit_short,)
        params.append(_parameter(row, row.name, names, row.full_help(command), row.panel))
        for alias in row.aliases:
            short = alias.short or (alias.submit_short if submit_shorts else "")
            # An earlier elxpk spelling is accepted but not listed: the row's help names it ("Also ...").
            hidden = row.hidden or alias.dialect == flag_rows.EARLIER
            aliases.append(_parameter(row._replace(kind=alias.kind or row.kind, hidden=hidden), alias.key,
                                      (alias.spelling, short) if short else (alias.spelling,),
                                      row.alias_help(alias), flag_table.GCLUSTER_PANEL))
    return params + aliases


def _parameter(row: Flag, key: str, names: tuple[str, ...], help_text: str, panel: str | None) -> inspect.Parameter:
    option = typer.Option(*names, help=help_text, rich_help_panel=panel,
                          metavar=row.metavar or _choices(row.choices) or _METAVARS.get(row.kind), hidden=row.hidden,
                          autocompletion=completion.for_row(row))
    kind: Any
    if row.kind == flag_rows.BOOL:
        kind, default = (Annotated[bool | None, option], None) if row.off_flag else (Annotated[bool, option], False)
    elif row.kind == flag_rows.LIST:
        kind, default = Annotated[list[str] | None, option], None
    else:
        kind, default = Annotated[_TEXT, option], None
    return inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=default)


def _choices(choices: tuple[str, ...]) -> str | None:
    """The help's metavar of a flag with a closed set of values: [delete|evict|exit] (typer would print <str>)."""
    return "[" + "|".join(choices) + "]" if choices else None


def with_flags(command: str, rows: tuple[Flag, ...] | None = None, *,
               submit_shorts: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command its flags from a flag table (see `flag_parameters`); it receives them as
    `flags: {name: value}`."""
    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        decorated = _extend_signature(func, "flags", flag_parameters(command, rows, submit_shorts=submit_shorts), dict)
        # Which flags name a file read or written, from the rows: the wrappers above (functools.wraps, typer's
        # update_wrapper) carry it to the click command, whose raw checks read it (elxpk/cli/arg_checks.py).
        decorated.__dict__["path_flags"] = {**getattr(func, "path_flags", {}), **flag_rows.path_flags(
            flag_table.of_command(command) if rows is None else rows)}
        return decorated
    return decorate

"""`elxpk workload status|list|delete|logs|wait|kill-slice`: parse and validate flags, then delegate.

Flags are checked before any I/O; the cluster is reached through elxpk.cluster (imported lazily, so
`elxpk --help` and `workload create --dry-run` never load the kubernetes or Google clients).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Mapping
from typing import Annotated, Any

import typer

from elxpk import accelerators
from elxpk.cli import options
from elxpk.errors import UsageError

Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


def _connect(cluster: options.ClusterSelection):
    """Validate the selection (UsageError before any network), then connect."""
    from elxpk.cluster.connect import connect
    from elxpk.cluster.defaults import validate_namespace

    target = cluster.resolve()
    validate_namespace(target.namespace)
    return connect(target, resolved=True), target.namespace


def workload_name(name: str) -> str:
    """NAME as given, when it can name a JobSet (a DNS-1035 label); else UsageError (exit 2) before any I/O.

    An empty NAME would reach the API as the collection's path (a list, or a delete of every JobSet)."""
    from elxpk.admission.identifiers import dns1035_label

    if not name.strip():
        raise UsageError(f"NAME {name!r}: empty; name the workload, e.g. my-run-1 (`elxpk workload list` "
                         "shows them)")
    problems = dns1035_label(name)
    if problems:
        raise UsageError(f"NAME {name!r}: not a workload name ({'; '.join(problems)}); e.g. my-run-1")
    return name


def _output(output: str) -> str:
    return options.output_format("status", output)


# Piped output (a file, grep, less) is not cut to a terminal's width: Rich would take 80 columns and cut a
# table's long cells (the scheduler's message, the fix) with an ellipsis that no one can read back.
PIPED_WIDTH = 4096


def _console(stderr: bool = False):
    from rich.console import Console

    console = Console(stderr=stderr, highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = PIPED_WIDTH
    return console


def _confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"{question} needs confirmation: pass --yes (stdin is not a terminal)")
    if not typer.confirm(question, default=False):
        raise typer.Exit(1)


def _duration(flag: str, value: str | None) -> float | None:
    from elxpk.units import parse_duration

    if value is None:
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise UsageError(f"{flag} {value}: {exc}") from None
    if seconds < 0:
        raise UsageError(f"{flag} {value}: must not be negative")
    return seconds


@options.with_flags("status", (accelerators.BY_NAME["chip_hour_price"],))
@options.with_cluster
def status(
    name: Annotated[str, options.workload_argument()],
    output: options.StatusOutput = "table",
    why: Annotated[bool, typer.Option("--why", help="Why it is not running: Kueue's verdict (quota, admission "
                                      "checks, eviction), the scheduler's and kubelet's (node pools, TPU chips, "
                                      "taints, image pulls, crash loops), each with the flag or command that "
                                      "fixes it.")] = False,
    stuck_after: Annotated[str, typer.Option("--stuck-after", help="Show one line of why when Queued, Admitted "
                                             "but not running, or Restarting for longer than this.")] = "2m",
    watch: Annotated[bool, typer.Option("--watch", "-w", help="A live view kept current by the API's watch, "
                                        "until the workload succeeds (exit 0) or fails (exit 1), or Ctrl-C "
                                        "(130); with -o json, one JSON object per change.")] = False,
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
    flags: Mapping[str, Any] = options.NO_FLAGS,
) -> None:
    """Elastic-aware state: slices healthy N/M, restart budgets, Kueue admission, chip-hours and money spent."""
    workload_name(name)
    output = _output(output)
    problems = []
    if watch and output == "yaml":
        problems.append("-o yaml --watch: a stream of changes is -o json (one object a line) or the table view")
    if watch and why:
        problems.append("--why --watch: the live view shows the why line already; drop --why, or run "
                        "`status --why` once")
    if problems:
        raise UsageError(*problems)
    stuck_after_s = _duration("--stuck-after", stuck_after)
    price = accelerators.checked_price(flags.get("chip_hour_price"))
    kube, ns = _connect(cluster)
    from elxpk.cluster.chips import with_chip_hours
    from elxpk.cluster.observe import fetch_status
    from elxpk.cluster.views import dump, status_renderables, why_renderables

    def read(on_objects=None):
        now = time.time()
        found = fetch_status(kube, ns, name, now=now, with_progress=True, stuck_after_s=stuck_after_s, why=why,
                             on_objects=on_objects)
        return with_chip_hours(found, price, now)

    if watch:
        from elxpk.cli.status_watch_view import run_watch

        run_watch(kube, ns, name, read, json_out=output == "json")
        return
    result = read()
    if output == "table":
        console = _console()
        for renderable in status_renderables(result) + (why_renderables(result) if why else []):
            console.print(renderable)
    else:
        print(dump(result.to_dict(), output))


@options.with_cluster
def list_(
    filter_: Annotated[str | None, typer.Option("--filter", help="Only names containing this text.")] = None,
    regex: Annotated[bool, typer.Option("--regex", help="Treat --filter as a regular expression.")] = False,
    state: Annotated[str | None, typer.Option("--status", help="Only this state: Queued, Admitted, Running, "
                                              "Degraded, Restarting, Succeeded or Failed.")] = None,
    output: options.StatusOutput = "table",
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Workloads of the namespace (xpk-created ones too): name, state, healthy slices, restarts, age."""
    from elxpk.cluster.status import STATES

    output = _output(output)
    problems = []
    wanted_state = None
    if state is not None:
        wanted_state = next((s for s in STATES if s.lower() == state.lower()), None)
        if wanted_state is None:
            problems.append(f"--status {state}: use one of {', '.join(STATES)}")
    matcher = None
    if filter_ is not None:
        try:
            matcher = re.compile(filter_ if regex else re.escape(filter_))
        except re.error as exc:
            problems.append(f"--filter {filter_!r}: not a valid regular expression ({exc})")
    if problems:
        raise UsageError(*problems)
    kube, ns = _connect(cluster)
    from elxpk.cluster.observe import fetch_all
    from elxpk.cluster.views import dump, list_record, list_table

    rows = [s for s in fetch_all(kube, ns, now=time.time())
            if (matcher is None or matcher.search(s.name)) and (wanted_state is None or s.state == wanted_state)]
    if output == "table":
        if rows:
            _console().print(list_table(rows))
        else:
            print(f"no workloads in namespace {ns}" + (" match" if matcher or wanted_state else ""), file=sys.stderr)
    else:
        print(dump([list_record(s) for s in rows], output))


@options.with_cluster
def delete(
    name: Annotated[str | None, options.workload_argument("Workload to delete.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Delete every workload in the namespace.")] = False,
    yes: Yes = False,
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Delete a workload with foreground propagation (its Jobs and Pods go first)."""
    if (name is None) == (not all_):
        raise UsageError("give a workload NAME or --all (not both)")
    if name is not None:
        workload_name(name)
    kube, ns = _connect(cluster)
    from elxpk.cluster.ops import delete_workload

    if name is not None:
        delete_workload(kube, ns, name)
        print(f"jobset/{name} deleted (foreground: its pods stop first)")
        return
    names = [js["metadata"]["name"] for js in kube.list_jobsets(ns)]
    if not names:
        kube.require_namespace(ns)
        print(f"no workloads in namespace {ns}", file=sys.stderr)
        return
    _confirm(f"delete {len(names)} workloads in namespace {ns} ({', '.join(names)})?", yes)
    for each in names:
        delete_workload(kube, ns, each)
        print(f"jobset/{each} deleted")


@options.with_cluster
def logs(
    name: Annotated[str, options.workload_argument("Workload name.")],
    head: Annotated[bool, typer.Option("--head", help="The Pathways head (the default when there is one).")] = False,
    slice_: Annotated[int | None, typer.Option("--slice", help="Slice index K.")] = None,
    vm: Annotated[int | None, typer.Option("--vm", help="VM index I within the slice (default 0).")] = None,
    container: Annotated[str | None, typer.Option("--container", "-c", help="Container (default: the main one).")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Stream new lines until the pod ends.")] = False,
    tail: Annotated[int | None, typer.Option("--tail", help="Only the last N lines.")] = None,
    previous: Annotated[bool, typer.Option("--previous", "-p", help="The last terminated container's log "
                                           "(after a restart in place: why it exited).")] = False,
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Logs of the head, or of slice K, VM I."""
    workload_name(name)
    problems = []
    if previous and follow:
        problems.append("--previous and --follow: a terminated container's log does not grow; give one of them")
    if head and (slice_ is not None or vm is not None):
        problems.append("--head and --slice/--vm select different pods: give one of them")
    for flag, value in (("--slice", slice_), ("--vm", vm), ("--tail", tail)):
        if value is not None and value < 0:
            problems.append(f"{flag} {value}: must be 0 or more")
    if problems:
        raise UsageError(*problems)
    kube, ns = _connect(cluster)
    from elxpk.cluster.ops import log_source, read_logs

    source = log_source(kube, ns, name, head=head, slice_index=slice_, vm=vm, container=container)
    print(f"# {name} {source.what}: pod {source.pod}, container {source.container}"
          + (" (previous, terminated)" if previous else ""), file=sys.stderr)
    for line in read_logs(kube, ns, source, follow=follow, tail=tail, previous=previous):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


@options.with_cluster
def wait(
    name: Annotated[str, options.workload_argument("Workload name.")],
    for_: Annotated[str, typer.Option("--for", help="completed or running.")] = "completed",
    timeout: Annotated[str | None, typer.Option("--timeout", help="Give up after this long (90s, 2h, 3d); "
                                                "exit 124. Default: no limit.")] = None,
    poll: Annotated[str, typer.Option("--poll", help="Seconds between status checks.")] = "5s",
    output: options.StatusOutput = "table",
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Wait until the workload completes (or runs). Exit 0 success, 1 failed, 124 timeout."""
    workload_name(name)
    problems = []
    if for_ not in ("completed", "running"):
        problems.append(f"--for {for_}: use completed or running")
    timeout_s = poll_s = None
    try:
        timeout_s = _duration("--timeout", timeout)
    except UsageError as exc:
        problems.extend(exc.messages)
    try:
        poll_s = _duration("--poll", poll)
        if not poll_s:
            problems.append(f"--poll {poll}: must be more than 0")
    except UsageError as exc:
        problems.extend(exc.messages)
    try:
        output = _output(output)
    except UsageError as exc:
        problems.extend(exc.messages)
    if problems:
        raise UsageError(*problems)
    kube, ns = _connect(cluster)
    from elxpk.cluster.ops import wait_for
    from elxpk.cluster.views import dump

    err = _console(stderr=True)
    last: list[str] = []

    def show(status) -> None:
        line = f"{status.state}: {status.message} (slices {status.slices_healthy}/{status.slices_total})"
        if spinner is not None:
            spinner.update(f"{name}: {line}")
        elif not last or last[-1] != line:
            err.print(f"{name}: {line}")
        last.append(line)

    spinner = err.status(f"waiting for {name} ({for_})") if err.is_terminal else None
    try:
        if spinner is not None:
            spinner.start()
        result = wait_for(kube, ns, name, until=for_, timeout_s=timeout_s, clock=time.time, sleep=time.sleep,
                          poll_s=poll_s or 5.0, on_update=show)
    finally:
        if spinner is not None:
            spinner.stop()
    if output == "table":
        print(f"{name}: {result.state}")
    else:
        print(dump(result.to_dict(), output))


@options.with_cluster
def kill_slice(
    name: Annotated[str, options.workload_argument("Workload name.")],
    slice_: Annotated[str, typer.Option("--slice", help="Slice index K to kill, or random (a new draw each "
                                        "round).")],
    vm: Annotated[int | None, typer.Option("--vm", help="Only VM I of the slice (--mode delete, one round).")] = None,
    mode: Annotated[str, typer.Option("--mode", help="delete: force-delete the pods (a lost VM); evict: the "
                                      "Eviction API (a drain); exit: the trainer's container dies of a signal "
                                      "through exec.")] = "delete",
    exit_code: Annotated[int, typer.Option("--exit-code", help="With --mode exit: the code, 128 + a signal "
                                           "(137 SIGKILL, 143 SIGTERM).")] = 143,
    repeat: Annotated[int, typer.Option("--repeat", help="Soak test: this many rounds, each watched to "
                                        "recovery, then a summary.")] = 1,
    every: Annotated[str, typer.Option("--every", help="With --repeat: time from one kill to the next.")] = "10m",
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of --slice random (a soak run repeats).")] = None,
    yes: Yes = False,
    watch: Annotated[bool, typer.Option("--watch", help="Follow the slice until it runs again; report timings.")] = False,
    timeout: Annotated[str, typer.Option("--timeout", help="With --watch: give up after this long.")] = "30m",
    poll: Annotated[str, typer.Option("--poll", help="With --watch: time between checks.")] = "2s",
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Fault injection: take slice K down (force delete, eviction or a signal), once or as a soak test."""
    from elxpk.cluster.soak import MODES, check_exit_code
    from elxpk_contract.settings import plain_number_text

    workload_name(name)
    problems = []
    if slice_ != "random":
        try:
            if not plain_number_text(slice_):
                raise ValueError(slice_)
            if int(slice_) < 0:
                problems.append(f"--slice {slice_}: must be 0 or more")
        except ValueError:
            problems.append(f"--slice {slice_}: use a slice index (0, 1, ...) or random")
    if vm is not None and vm < 0:
        problems.append(f"--vm {vm}: must be 0 or more")
    if mode not in MODES:
        problems.append(f"--mode {mode}: use {', '.join(MODES)}")
    elif mode == "exit" and (problem := check_exit_code(exit_code)):
        problems.append(problem)
    if repeat < 1:
        problems.append(f"--repeat {repeat}: must be 1 or more")
    if vm is not None and (repeat > 1 or mode != "delete" or slice_ == "random"):
        problems.append("--vm: only with --mode delete, one round and a given --slice K; drop --vm to take "
                        "the whole slice down")
    timeout_s = poll_s = every_s = 0.0
    for flag, value in (("--timeout", timeout), ("--poll", poll), ("--every", every)):
        try:
            seconds = _duration(flag, value) or 0.0
        except UsageError as exc:
            problems.extend(exc.messages)
            continue
        if seconds <= 0 and flag != "--every":
            problems.append(f"{flag} {value}: must be more than 0")
        timeout_s, poll_s, every_s = {"--timeout": (seconds, poll_s, every_s), "--poll": (timeout_s, seconds, every_s),
                                      "--every": (timeout_s, poll_s, seconds)}[flag]
    if problems:
        raise UsageError(*problems)
    kube, ns = _connect(cluster)
    if repeat > 1 or mode != "delete" or slice_ == "random":
        _soak(kube, ns, name, slice_, mode, exit_code, repeat, every_s, seed, yes, watch, timeout_s, poll_s)
        return
    from elxpk.cluster.ops import kill, plan_kill, watch_recovery
    from elxpk.units import format_duration

    index = int(slice_)
    plan = plan_kill(kube, ns, name, index, vm)
    what = f"slice {index}" + (f" vm {vm}" if vm is not None else "")
    _confirm(f"force-delete {len(plan.pods)} pods of {what} of {name} ({', '.join(plan.pods)})?", yes)
    killed_at = time.time()
    kill(kube, ns, plan)
    print(f"killed {what} of {name}: {len(plan.pods)} pods force-deleted")
    if not watch:
        return
    err = _console(stderr=True)
    recovery = watch_recovery(kube, ns, name, plan, killed_at=killed_at, clock=time.time, sleep=time.sleep,
                              timeout_s=timeout_s, poll_s=poll_s, on_tick=lambda text: err.print(f"{name}: {text}"))
    print(f"{what} running again after {format_duration(recovery.slice_back_s)}")
    if recovery.next_step_s is not None:
        print(f"first training step after recovery: {format_duration(recovery.next_step_s)} after the kill")
    else:
        print("no recovery event from the trainer in the head's log")


def _soak(kube, ns: str, name: str, slice_: str, mode: str, exit_code: int, repeat: int, every_s: float,
          seed: int | None, yes: bool, watch: bool, timeout_s: float, poll_s: float) -> None:
    """Evict/exit modes, --slice random and --repeat: rounds watched to recovery when repeated or --watch."""
    import random

    from elxpk.cluster.soak import inject, soak, summary_lines
    from elxpk.units import format_duration

    how = {"delete": "force-delete", "evict": "evict", "exit": f"make exit with {exit_code}"}[mode]
    rounds = f"{repeat} times, every {format_duration(every_s)}" if repeat > 1 else "once"
    _confirm(f"{how} the pods of slice {slice_} of {name} in namespace {ns}, {rounds}?", yes)
    rng = random.Random(seed)
    if repeat == 1 and not watch:
        from elxpk.cluster.ops import plan_kill
        from elxpk.cluster.soak import slice_count

        index = rng.randrange(slice_count(kube, ns, name)) if slice_ == "random" else int(slice_)
        plan = plan_kill(kube, ns, name, index, None)
        inject(kube, ns, plan, mode, exit_code)
        done = {"delete": "force-deleted", "evict": "evicted", "exit": f"sent signal {exit_code - 128}"}[mode]
        print(f"slice {index} of {name}: {len(plan.pods)} pods {done}")
        return
    err = _console(stderr=True)

    def show(r) -> None:
        result = (f"back after {format_duration(r.recovery_s)}" if r.recovered else f"NOT recovered: {r.error}")
        print(f"round {r.index}/{repeat}: slice {r.slice} ({r.mode}, {r.pods} pods) {result}", flush=True)

    summary = soak(kube, ns, name, slice_spec=slice_, mode=mode, repeat=repeat, every_s=every_s,
                   exit_code=exit_code, rng=rng, clock=time.time, sleep=time.sleep, timeout_s=timeout_s,
                   poll_s=poll_s, on_tick=lambda text: err.print(f"{name}: {text}"), on_round=show)
    for line in summary_lines(summary):
        print(line)
    if summary.succeeded < len(summary.rounds):
        raise typer.Exit(1)

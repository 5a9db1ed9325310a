"""Validation of `workload create` flags into a WorkloadSpec: one pass, every error collected.

Raw values arrive as typed on the command line (integers as text), so a bad integer is reported
together with every other problem. Each message is one line: the flag, what is wrong, the fix.
A flag that would be silently ignored in this shape of workload is an error, not a no-op.
Each row's own kind, bounds, choices and default are read first, by the reader every command shares
(elxpk/flag_rows.py `read_all`, through FlagValues); what is checked here are the rules that tie several
flags together, over those typed values. The spec is built once, at the end; the warnings are returned
beside it (`Created`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from elxpk.admission.names import flag_problems
from elxpk.catalog import TpuType, UnknownGpuType, UnknownTpuType, lookup, lookup_gpu, tpu_suggestion
from elxpk.cluster.access.target import DEFAULT_NAMESPACE, namespace_problem
from elxpk.create.budget_checks import Budgets, Times, budget_findings, read_times
from elxpk.create.capacity import CAPACITY_KEYS, Capacity, read_capacity
from elxpk.create.cross_rules import (
    Env,
    Settings,
    Slices,
    min_slice_count_rules,
    node_limit_problem,
    pre_start_problems,
    reference_warnings,
    restart_codes,
    slice_rules,
)
from elxpk.create.dialect import pathways_only
from elxpk.create.failure_policy import backoff_limit_problem
from elxpk.create.flag_values import FlagValues
from elxpk.create.flags import COMMAND_CHECKS, OPTION_KEYS, SPEC_KEYS, TRAINER_SETTINGS, flag
from elxpk.create.records import CreateFlags
from elxpk.create.spec import TRAINER_COMMAND, Created, CreateOptions, WorkloadSpec
from elxpk.errors import UsageError
from elxpk.output_formats import OUTPUT_ROWS
from elxpk_contract.setting_rules import check_setting, flag_name
from elxpk_contract.setting_rules import default as trainer_default
from elxpk_contract.spelling import said, typed

# Flags that only mean something for a Pathways workload (xpk's `workload create` refuses them too).
_PATHWAYS_ONLY = ("proxy_server_image", "server_image", "worker_image", "pathways_gcs_location",
                  "pathways_proxy_env", "pathways_server_env", "pathways_worker_env",
                  "custom_proxy_server_args", "custom_server_args", "custom_worker_args")
# User-container flags that xpk's `create-pathways --headless` accepts and ignores (it renders no user
# container: xpk src/xpk/core/pathways.py get_user_workload_for_pathways): a warning, so xpk scripts run.
_XPK_HEADLESS_IGNORES = ("command", "docker_image", "docker_name", "env", "env_file")


class Shape(NamedTuple):
    """Pathways or multi-controller, headless or not, and what the user container runs."""

    pathways: bool
    headless: bool
    trainer: bool  # the bundled trainer
    maxtext: bool  # --trainer maxtext
    command: str | None


class Containers(NamedTuple):
    """Images, container name, Pathways args and env, as the spec holds them."""

    docker_image: str
    docker_name: str
    proxy_server_image: str
    server_image: str
    worker_image: str
    pathways_gcs_location: str
    custom_proxy_server_args: tuple[str, ...]
    custom_server_args: tuple[str, ...]
    custom_worker_args: tuple[str, ...]
    env: Env
    pathways_proxy_env: Env
    pathways_server_env: Env
    pathways_worker_env: Env


class FlagChecker(FlagValues):
    """Collects every error (and warning) over one pass through the flags."""

    def __init__(self, flags: Mapping[str, object]) -> None:
        super().__init__(flags)
        # The trainer settings refused, by their reader or by a rule over them (`trainer_settings`): MaxText's
        # overrides leave them out rather than report them twice.
        self.refused: set[str] = set()

    def given(self, key: str) -> bool:
        value = self.flags.get(key)
        return value is not None and value is not False and value != [] and value != ()

    def build(self) -> Created:
        unknown = set(self.flags) - _KNOWN_KEYS
        if unknown:  # a programming error in the caller, not user input
            raise TypeError(f"parse_create got unknown keys: {sorted(unknown)}")
        v = self.values
        workload, tpu, gpu = self.checked("workload"), *self.machine()  # the name's length: flag_problems
        queue, namespace, account = self.checked("queue"), self.namespace(), self.service_account()
        shape = self.shape()
        slices = self.slices(shape.pathways)
        box = self.containers()
        capacity = self.capacity()
        num_nodes, docker_name = v.num_nodes, box.docker_name
        if self.given("device_type") or self.given("num_nodes"):
            from elxpk.create.gpu import gpu_flag_problems  # lazy: keeps elxpk.create.gpu off a TPU dry-run

            num_nodes, docker_name = gpu_flag_problems(self, maxtext=shape.maxtext, env=box.env,
                                                       docker_name=docker_name)
        codes, problems = restart_codes(self.text("restart_on_exit_codes"), headless=shape.headless)
        self.errors += problems
        # What JobSet and the API server refuse: elxpk/admission/names.py.
        self.errors += flag_problems(dict(
            pathways=shape.pathways, headless=shape.headless, tpu=tpu, gpu=gpu, num_nodes=num_nodes,
            num_slices=slices.num_slices, workload=workload, docker_name=docker_name,
            max_restarts=v.max_restarts, ttl_seconds_after_finished=v.ttl_seconds_after_finished))
        budget = backoff_limit_problem(elastic=slices.elastic_slices > 0, max_slice_restarts=slices.max_slice_restarts,
                                       vms_per_slice=tpu.vms_per_slice) if tpu is not None and shape.pathways else None
        if budget:  # the Pathways worker Job's backoffLimit, an int32 like the fields above
            self.errors.append(budget)
        nodes = node_limit_problem(slices.num_slices, tpu.vms_per_slice if tpu else num_nodes or 1,
                                   f"{tpu.vms_per_slice} VM(s) of {tpu.name}" if tpu else f"{num_nodes} node(s)")
        if nodes:
            self.errors.append(nodes)
        settings = self.trainer_settings(slices)
        extra = self.flags.get("command")
        if shape.trainer and isinstance(extra, str) and extra.strip():
            from elxpk.create.trainer_args import (
                trainer_arg_problems,  # lazy: keeps elxpk.create.trainer_args, shlex off `workload create --dry-run`
            )

            self.errors += trainer_arg_problems(extra, dict(settings))
        command = self.settings_destination(shape, slices.elastic_slices, settings, box.env)
        pre_start = self.pre_start(shape.maxtext, settings)
        options, times = self.outputs()
        self.budgets(shape, slices, settings, tpu, times)
        env = () if shape.headless else box.env  # headless: ignored with a warning (see shape), no user container
        if not shape.headless:
            self.warnings += reference_warnings(command, env, settings, gpu=gpu is not None)
        if self.errors:
            raise UsageError(*self.errors)
        spec = WorkloadSpec(
            workload=workload, tpu=tpu, gpu=gpu, num_nodes=num_nodes, priority=v.priority, queue=queue,
            namespace=namespace, service_account=account, pathways=shape.pathways, headless=shape.headless,
            trainer=shape.trainer, maxtext=shape.maxtext, command=command, num_slices=slices.num_slices,
            elastic_slices=slices.elastic_slices, max_slice_restarts=slices.max_slice_restarts,
            max_restarts=v.max_restarts, termination_grace_period_seconds=v.termination_grace_period_seconds,
            ttl_seconds_after_finished=v.ttl_seconds_after_finished, docker_image=box.docker_image,
            docker_name=docker_name, proxy_server_image=box.proxy_server_image, server_image=box.server_image,
            worker_image=box.worker_image, pathways_gcs_location=box.pathways_gcs_location,
            custom_proxy_server_args=box.custom_proxy_server_args, custom_server_args=box.custom_server_args,
            custom_worker_args=box.custom_worker_args, env=env, pathways_proxy_env=box.pathways_proxy_env,
            pathways_server_env=box.pathways_server_env, pathways_worker_env=box.pathways_worker_env,
            restart_on_exit_codes=codes, settings=settings, checkpoint_pre_start=pre_start, capacity=capacity)
        return Created(spec, options, tuple(self.warnings))

    def machine(self) -> tuple[TpuType | None, Any]:
        """The TPU type, or the GPU machine (--device-type), from the catalogs; (None, None) when neither."""
        err = self.errors.append
        if self.given("device_type") and self.given("tpu_type"):
            err("--tpu-type and --device-type: one quantity, give one (--device-type names a GPU machine, e.g. "
                "h100-80gb-8, or a TPU type as --tpu-type does)")
        elif self.given("device_type"):
            try:
                return None, lookup_gpu(self.checked("device_type"))
            except UnknownGpuType as exc:  # a TPU of the catalog is --tpu-type by now (elxpk/create/dialect.py)
                err(f"--device-type: {exc}; or a TPU type, as --tpu-type: {tpu_suggestion(self.checked('device_type'))}")
        elif tpu_name := self.checked("tpu_type"):  # required: its row says so, and names --device-type
            try:
                return lookup(tpu_name), None
            except UnknownTpuType as exc:
                err(f"--tpu-type: {exc}")
        return None, None

    def namespace(self) -> str:
        namespace = self.text("namespace", DEFAULT_NAMESPACE) or ""
        problem = namespace_problem(namespace, said("namespace"))  # every verb's check, in this spelling
        if problem:
            self.errors.append(problem)
        return namespace

    def service_account(self) -> str | None:
        """None (not given): the shape's default, xpk's (elxpk/create/templates)."""
        return None if self.flags.get("service_account") is None else self.checked("service_account")

    def outputs(self) -> tuple[CreateOptions, Times]:
        """How the command runs (dry run, replace, output), apart from the manifest (see CreateOptions), and
        the step, save and replacement times."""
        err = self.errors.append
        fmt, problem = OUTPUT_ROWS["manifest"].read(self.text("output_format", "yaml") or "yaml")  # -o's row
        if problem:
            err(problem)
        dry_run, server = self.values.dry_run, self.values.dry_run_server
        if dry_run and server:
            err("--dry-run and --dry-run-server: pick one (client-side print, or a server-side dry run)")
        out_file = self.text("output_manifest_file")
        if out_file is not None:
            from elxpk.outfile import (
                output_problem as path_problem,  # lazy: keeps elxpk.outfile off `workload create --dry-run`
            )

            problem = path_problem(out_file, flag("output_manifest_file"), example="manifest.yaml")
            if problem:
                err(problem)
        times, problems = read_times(self.values, self.flags)
        self.errors.extend(problems)
        return CreateOptions(dry_run="server" if server else ("client" if dry_run else None),
                             replace=bool(self.values.replace), output_format=fmt,
                             output_manifest_file=out_file, slice_mtbf_seconds=self.values.slice_mtbf,
                             step_time_seconds=times.step_s, times=times), times

    def budgets(self, shape: Shape, slices: Slices, settings: Settings, tpu: TpuType | None, times: Times) -> None:
        """The timeouts and restart budgets against the step, save and replacement times
        (elxpk/create/budget_checks.py): impossible combinations are errors, poor ones warnings."""
        given = dict(settings)

        def setting(name: str) -> Any:
            return given[name] if name in given else trainer_default(name)

        budgets = Budgets(
            pathways=shape.pathways, elastic=slices.elastic_slices > 0, has_trainer=not shape.headless,
            grace_s=self.values.termination_grace_period_seconds, max_slice_restarts=slices.max_slice_restarts,
            max_restarts=self.values.max_restarts, elastic_timeout_s=setting("elastic_timeout_seconds"),
            elastic_min_slice_count=setting("elastic_min_slice_count"),
            stall_timeout_s=setting("stall_timeout_seconds"), elastic_max_retries=given.get("elastic_max_retries"),
            vms_per_slice=tpu.vms_per_slice if tpu else 1)
        errors, warnings = budget_findings(budgets, times)
        self.errors.extend(errors)
        self.warnings.extend(warnings)

    def capacity(self) -> Capacity | None:
        """--spot, --flex-start, --reservation NAME or --on-demand, at most one (elxpk/create/capacity.py)."""
        given = {key: self.text(key) if key == "reservation" else self.get(key) for key in CAPACITY_KEYS}
        capacity, problems = read_capacity(given, {key: flag(key) for key in CAPACITY_KEYS},
                                           self.values.max_run_duration, flag("max_run_duration"))
        self.errors += problems
        return capacity

    def shape(self) -> Shape:
        """Pathways or multi-controller, headless or not, user command or bundled trainer."""
        err = self.errors.append
        gpu = self.given("device_type")  # Pathways runs on TPUs only: a GPU workload is multi-controller
        pathways = not self.values.no_pathways and not gpu
        multi = "--device-type (Pathways runs on TPUs only)" if gpu else "--no-pathways"
        headless = bool(self.values.headless)
        kind = self.values.trainer  # None (the user's own --command), "elxpk" or "maxtext"
        trainer, maxtext = kind == "elxpk", kind == "maxtext"
        command = self.text("command")
        if command is not None and not command.strip():
            command = None
        # gcluster's spelling leaves Pathways off unless --pathways: the line says so (dialect.pathways_off), not
        # to drop the --no-pathways the user never typed.
        told = gpu or typed("no_pathways")
        drops = flag("headless")  # as the command spells it (gcluster's --pathways-headless)
        if headless and not pathways:
            self.errors += pathways_only(
                drops, f"{drops}: only with Pathways (it drops the user container); drop {multi} or {drops}", told)
        elif headless:
            if kind:
                err(f"--trainer {kind}: needs the user container that {drops} drops; drop one of them")
            for key in _XPK_HEADLESS_IGNORES:  # xpk ignores them; so do we, aloud
                if self.given(key):
                    self.warnings.append(f"{flag(key)}: ignored, a {drops} workload has no user container "
                                         "(as in xpk); drop it to silence this")
            for name in _SETTING_NAMES:  # elxpk's own flags: no xpk script passes them, so a mistake
                if self.given(name):
                    err(f"{flag_name(name)}: a {drops} workload has no user container to pass it to; drop it")
            command = None
        elif trainer:
            command = TRAINER_COMMAND + (f" {command}" if command else "")
            if not self.given("docker_image"):
                err(f"--trainer: needs {flag('docker_image')}, an image built from trainer/Dockerfile "
                    "(elxpk[trainer] installed)")
        elif command is None and not maxtext:  # maxtext: settings_destination names --trainer maxtext
            err(f"--command: required unless {drops} (Pathways without a user container) or --trainer; "
                "e.g. --command 'python3 train.py'")
        if not pathways:
            for key in (k for k in _PATHWAYS_ONLY if self.given(k)):
                self.errors += pathways_only(
                    flag(key), f"{flag(key)}: only for Pathways workloads; drop it or drop {multi}", told)
        return Shape(pathways, headless, trainer, maxtext, command)

    def settings_destination(self, shape: Shape, elastic_slices: int, settings: Settings, env: Env) -> str | None:
        """Where the trainer settings go, by what runs: with --trainer maxtext, into the MaxText command as
        overrides (its refusals are errors here); with another command, a warning when nothing reads them.
        Returns the command the container runs."""
        if not (shape.maxtext or settings or elastic_slices):
            return shape.command  # nothing to place (and the render path skips importing the MaxText modules)
        if shape.maxtext and not shape.headless:
            from elxpk.maxtext import (
                launcher,  # lazy: MaxText's overrides and key table, only for --trainer maxtext
            )

            refused = [name for name, _ in settings if name in self.refused]
            done = launcher.maxtext_command(shape.command, settings, pathways=shape.pathways,
                                            elastic=elastic_slices > 0, refused=refused, env=env)
            self.errors.extend(done.errors)
            self.warnings.extend(done.warnings)
            return done.command
        if shape.command and not shape.trainer and not shape.headless:
            from elxpk.maxtext.unread_settings import (
                unread_settings_warnings,  # lazy: elxpk.maxtext.command, only for a --command given settings
            )

            self.warnings.extend(unread_settings_warnings(shape.command, settings, elastic_slices))
        return shape.command

    def pre_start(self, maxtext: bool, settings: Settings) -> str | None:
        """--checkpoint-pre-start IMAGE: only for a MaxText run with a checkpoint directory to check."""
        if not self.given("checkpoint_pre_start"):
            return None
        image = self.checked("checkpoint_pre_start")  # the image itself: its row's check
        self.errors += pre_start_problems(maxtext=maxtext, checkpoint_dir=dict(settings).get("checkpoint_dir"))
        return image

    def slices(self, pathways: bool) -> Slices:
        """Slice counts and restart budgets; see docs/launcher.md for how they reach the manifest."""
        counts, errors, warnings = slice_rules(
            self.values.num_slices, self.values.elastic_slices, self.values.max_slice_restarts,
            pathways=pathways, restarts_given=self.given("max_slice_restarts"),
            elastic_given=self.given("elastic_slices"))
        self.errors += errors
        self.warnings += warnings
        return counts

    def containers(self) -> Containers:
        """Images, container name, Pathways args and env."""
        server_image = self.checked("server_image")
        return Containers(
            docker_image=self.checked("docker_image"),
            docker_name=self.checked("docker_name"),
            proxy_server_image=self.checked("proxy_server_image"),
            server_image=server_image,
            worker_image=self.checked("worker_image") or server_image,  # --worker-image defaults to --server-image
            pathways_gcs_location=self.checked("pathways_gcs_location"),
            custom_proxy_server_args=self.args("custom_proxy_server_args"),
            custom_server_args=self.args("custom_server_args"),
            custom_worker_args=self.args("custom_worker_args"),
            env=self.env(),
            pathways_proxy_env=self.container_env("pathways_proxy_env"),
            pathways_server_env=self.container_env("pathways_server_env"),
            pathways_worker_env=self.container_env("pathways_worker_env"),
        )

    def trainer_settings(self, slices: Slices) -> Settings:
        """The trainer settings given as flags, checked by the contract (elxpk_contract.settings), so the
        launcher refuses exactly what the trainer would, with the same message."""
        err = self.errors.append
        values: dict[str, Any] = {}
        for name in _SETTING_NAMES:
            raw = self.get(name)
            if raw is None:
                continue
            value, problem = check_setting(name, raw)  # its row's reader (create/flags.py TRAINER_SETTINGS)
            if problem:
                err(problem)
                self.refused.add(name)
            else:
                values[name] = value
        errors, warnings = min_slice_count_rules(slices, values.get("elastic_min_slice_count"))
        if errors:  # the minimum against the slice counts: a setting its reader took, refused by the rule
            self.refused.add("elastic_min_slice_count")
        self.errors += errors
        self.warnings += warnings
        return tuple(values.items())

_SETTING_NAMES = tuple(row.name for row in TRAINER_SETTINGS)
# The keys parse_create takes: the flag table's (the manifest's and the invocation options, and the checks
# `workload create` runs itself, read with the rest) and the trainer settings the contract gives the launcher.
_KNOWN_KEYS = SPEC_KEYS | OPTION_KEYS | frozenset(COMMAND_CHECKS) | frozenset(_SETTING_NAMES)


def parse_create(**flags: object) -> Created:
    """Every `workload create` flag validated at once: the spec, the invocation options and the warnings
    (`Created`), or UsageError."""
    return check_create(flags)[0]


def check_create(flags: Mapping[str, object]) -> tuple[Created, CreateFlags]:
    """`parse_create`, with the flags as read (the stages after it read theirs: --check-data, --check-fit)."""
    checker = FlagChecker(flags)
    return checker.build(), checker.values


def spec_from_flags(**flags: object) -> WorkloadSpec:
    """Validate raw flag values into a spec, or raise UsageError with all errors. Only what the manifest
    depends on; the invocation's own options go through `parse_create`."""
    options = sorted(set(flags) & OPTION_KEYS)
    if options:  # a programming error in the caller, not user input
        raise TypeError(f"spec_from_flags got invocation options {options}; use parse_create")
    return FlagChecker(flags).build().spec

"""Validation of `workload create` flags into a WorkloadSpec: one pass, every error collected.

Raw values arrive as typed on the command line (integers as text), so a bad integer is reported
together with every other problem. Each message is one line: the flag, what is wrong, the fix.
A flag that would be silently ignored in this shape of workload is an error, not a no-op.
Each flag's own bounds, choices and default are its row in the flag table (elxpk/create/flags.py, read
through FlagValues); what is checked here are the rules that tie several flags together.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from elxpk.admission.names import flag_problems
from elxpk.catalog import UnknownTpuType, lookup
from elxpk.cluster.target import DEFAULT_NAMESPACE, namespace_problem
from elxpk.create.budget_checks import Budgets, budget_findings, read_times
from elxpk.create.capacity import CAPACITY_KEYS, Capacity, read_capacity
from elxpk.create.flag_values import FlagValues
from elxpk.create.flags import (
    BY_NAME,
    OPTION_KEYS,
    RESERVED_ENV,
    SPEC_KEYS,
    TRAINERS,
    default,
    flag,
)
from elxpk.create.spec import TRAINER_COMMAND, CreateOptions, WorkloadSpec
from elxpk.errors import UsageError
from elxpk.output_formats import output_problem
from elxpk_contract.setting_rules import (
    LAUNCHER_DERIVED,
    LAUNCHER_FLAG,
    check_setting,
    cross_problems,
    env_name,
    exposed,
    flag_name,
    redundant_min_slice_count,
    slices_waited_for,
)
from elxpk_contract.setting_rules import default as trainer_default

# Kubernetes expands `$(NAME)` in a container's command, args and env values when NAME is an env var of
# the container, and leaves it as is otherwise; `$$(NAME)` is the escape (kubernetes/pkg/kubelet/container/
# helpers.go ExpandContainerCommandAndArgs, third_party/forked/golang/expansion/expand.go).
_K8S_REFERENCE = re.compile(r"\$\$|\$\(([^)]*)\)")
# Flags that only mean something for a Pathways workload (xpk's `workload create` refuses them too).
_PATHWAYS_ONLY = ("proxy_server_image", "server_image", "worker_image", "pathways_gcs_location",
                  "pathways_proxy_env", "pathways_server_env", "pathways_worker_env",
                  "custom_proxy_server_args", "custom_server_args", "custom_worker_args")
# User-container flags that xpk's `create-pathways --headless` accepts and ignores (it renders no user
# container: xpk src/xpk/core/pathways.py get_user_workload_for_pathways): a warning, so xpk scripts run.
_XPK_HEADLESS_IGNORES = ("command", "docker_image", "docker_name", "env", "env_file")


class FlagChecker(FlagValues):
    """Collects every error (and warning) over one pass through the flags."""

    def outputs(self) -> CreateOptions:
        """How the command runs (dry run, replace, output), apart from the manifest; see CreateOptions."""
        err = self.errors.append
        fmt = self.text("output_format", "yaml") or "yaml"
        problem = output_problem("manifest", fmt)
        if problem:
            err(problem)
        fmt = fmt.lower()
        dry_run = self.get("dry_run", False)
        server = self.get("dry_run_server", False)
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

        times, problems = read_times(step=self.get("step_time"), save=self.get("checkpoint_save_time"),
                                     replacement=self.get("slice_replacement_time"), from_run=self.get("from_run"))
        self.errors.extend(problems)
        return CreateOptions(dry_run="server" if server else ("client" if dry_run else None),
                             replace=bool(self.get("replace", False)), output_format=fmt,
                             output_manifest_file=out_file,
                             slice_mtbf_seconds=self.duration("slice_mtbf"),
                             step_time_seconds=times.step_s, times=times)

    def budgets(self, fields: Mapping[str, Any], times: Any) -> None:
        """The timeouts and restart budgets against the step, save and replacement times
        (elxpk/create/budget_checks.py): impossible combinations are errors, poor ones warnings."""

        given = dict(fields["settings"])

        def setting(name: str) -> Any:
            return given[name] if name in given else trainer_default(name)

        budgets = Budgets(
            pathways=bool(fields["pathways"]), elastic=int(fields["elastic_slices"]) > 0,
            has_trainer=not fields["headless"], grace_s=int(fields["termination_grace_period_seconds"]),
            max_slice_restarts=int(fields["max_slice_restarts"]), max_restarts=int(fields["max_restarts"]),
            elastic_timeout_s=setting("elastic_timeout_seconds"),
            elastic_min_slice_count=setting("elastic_min_slice_count"),
            stall_timeout_s=setting("stall_timeout_seconds"), elastic_max_retries=given.get("elastic_max_retries"),
            vms_per_slice=getattr(fields["tpu"], "vms_per_slice", 1))
        errors, warnings = budget_findings(budgets, times)
        self.errors.extend(errors)
        self.warnings.extend(warnings)

    def given(self, key: str) -> bool:
        value = self.flags.get(key)
        return value is not None and value is not False and value != [] and value != ()

    def build(self) -> tuple[WorkloadSpec, CreateOptions]:
        unknown = set(self.flags) - _KNOWN_KEYS
        if unknown:  # a programming error in the caller, not user input
            raise TypeError(f"parse_create got unknown keys: {sorted(unknown)}")
        fields: dict[str, object] = {}
        fields.update(self.identity())
        fields.update(self.shape())
        fields.update(self.slices(bool(fields["pathways"])))
        fields.update(self.containers())
        fields["capacity"] = self.capacity()
        if self.given("device_type") or self.given("num_nodes"):
            from elxpk.create.gpu import gpu_flag_problems  # lazy: keeps elxpk.create.gpu off a TPU dry-run

            fields["num_nodes"] = gpu_flag_problems(self, fields)
        fields["restart_on_exit_codes"] = self.restart_codes(fields)
        self.errors += flag_problems(fields)  # what JobSet and the API server refuse: elxpk/admission/names.py
        n, e, restarts = (int(fields[k]) for k in ("num_slices", "elastic_slices", "max_slice_restarts"))  # type: ignore[call-overload]
        fields["settings"] = self.trainer_settings(n, e, restarts)
        extra = self.flags.get("command")
        if fields["trainer"] and isinstance(extra, str) and extra.strip():
            from elxpk.create.trainer_args import (
                trainer_arg_problems,  # lazy: keeps elxpk.create.trainer_args, shlex off `workload create --dry-run`
            )

            self.errors += trainer_arg_problems(extra, dict(fields["settings"]))  # type: ignore[call-overload]
        self.settings_destination(fields)
        fields["checkpoint_pre_start"] = self.pre_start(fields)
        options = self.outputs()
        self.budgets(fields, options.times)
        if fields["headless"]:
            fields["env"] = ()  # ignored with a warning (see shape): no user container to carry it
        else:
            self.references(fields["command"], fields["env"], fields["settings"], gpu=fields["gpu"] is not None)  # type: ignore[arg-type]
        if self.errors:
            raise UsageError(*self.errors)
        return WorkloadSpec(**fields, warnings=tuple(self.warnings)), options  # type: ignore[arg-type]

    def capacity(self) -> Capacity | None:
        """--spot, --flex-start, --reservation NAME or --on-demand, at most one (elxpk/create/capacity.py)."""
        max_run, problem = BY_NAME["max_run_duration"].read(self.get("max_run_duration"))
        given = {key: self.text(key) if key == "reservation" else self.get(key) for key in CAPACITY_KEYS}
        capacity, problems = read_capacity(given, {key: flag(key) for key in CAPACITY_KEYS},
                                           None if problem else max_run, flag("max_run_duration"))
        self.errors += [problem] if problem else []
        self.errors += problems
        return capacity

    def identity(self) -> dict[str, object]:
        """Names and labels: workload, TPU type, queue, namespace, priority."""
        err = self.errors.append
        workload = self.checked("workload")  # its length limit depends on the shape: build()
        tpu, gpu = None, None
        if self.given("device_type") and self.given("tpu_type"):
            err("--tpu-type and --device-type: give one (--device-type names a GPU machine, e.g. h100-80gb-8)")
        elif self.given("device_type"):
            from elxpk.create.gpu import (  # lazy: keeps elxpk.create.gpu off a TPU dry-run
                UnknownGpuType,
                lookup_gpu,
            )

            try:
                gpu = lookup_gpu(self.checked("device_type"))
            except UnknownGpuType as exc:
                err(f"--device-type: {exc}")
        elif tpu_name := self.checked("tpu_type"):  # required: its row says so, and names --device-type
            try:
                tpu = lookup(tpu_name)
            except UnknownTpuType as exc:
                err(f"--tpu-type: {exc}")
        priority = self.choice("priority")
        queue = self.checked("queue")
        namespace = self.text("namespace", DEFAULT_NAMESPACE) or ""
        problem = namespace_problem(namespace)
        if problem:
            err(problem)
        # None (not given): the shape's default, xpk's (elxpk/create/templates).
        account = None if self.flags.get("service_account") is None else self.checked("service_account")
        return dict(workload=workload, tpu=tpu, gpu=gpu, priority=priority, queue=queue, namespace=namespace,
                    service_account=account)

    def shape(self) -> dict[str, object]:
        """Pathways or multi-controller, headless or not, user command or bundled trainer."""
        err = self.errors.append
        gpu = self.given("device_type")  # Pathways runs on TPUs only: a GPU workload is multi-controller
        pathways = not bool(self.get("no_pathways", False)) and not gpu
        multi = "--device-type (Pathways runs on TPUs only)" if gpu else "--no-pathways"
        headless = bool(self.get("headless", False))
        kind = self.trainer_kind()
        trainer, maxtext = kind == "elxpk", kind == "maxtext"
        command = self.text("command")
        if command is not None and not command.strip():
            command = None
        if headless and not pathways:
            err(f"--headless: only with Pathways (it drops the user container); drop {multi} or --headless")
        elif headless:
            if kind:
                err(f"--trainer {kind}: needs the user container that --headless drops; drop one of them")
            for key in _XPK_HEADLESS_IGNORES:  # xpk ignores them; so do we, aloud
                if self.given(key):
                    self.warnings.append(f"{flag(key)}: ignored, a --headless workload has no user container "
                                         "(as in xpk); drop it to silence this")
            for name in _SETTING_NAMES:  # elxpk's own flags: no xpk script passes them, so a mistake
                if self.given(name):
                    err(f"{flag_name(name)}: a --headless workload has no user container to pass it to; drop it")
            command = None
        elif trainer:
            command = TRAINER_COMMAND + (f" {command}" if command else "")
            if not self.given("docker_image"):
                err("--trainer: needs --docker-image, an image built from trainer/Dockerfile "
                    "(elxpk[trainer] installed)")
        elif command is None and not maxtext:  # maxtext: settings_destination names --trainer maxtext
            err("--command: required unless --headless (Pathways without a user container) or --trainer; "
                "e.g. --command 'python3 train.py'")
        if not pathways:
            for key in _PATHWAYS_ONLY:
                if self.given(key):
                    err(f"{flag(key)}: only for Pathways workloads; drop it or drop {multi}")
        return dict(pathways=pathways, headless=headless, trainer=trainer, maxtext=maxtext, command=command)

    def trainer_kind(self) -> str | None:
        """--trainer: None (the user's own --command), "elxpk" (bare --trainer) or "maxtext"."""
        raw = self.flags.get("trainer")
        if raw is None or raw is False:
            return None
        if raw is True:
            return "elxpk"
        kind = str(raw).strip().lower()
        if kind not in TRAINERS:
            self.errors.append(f"--trainer {raw!r}: use --trainer (or --trainer elxpk) for the bundled trainer, "
                               f"or --trainer maxtext for a MaxText --command")
            return None
        return kind

    def settings_destination(self, fields: dict[str, object]) -> None:
        """Where the trainer settings go, by what runs: with --trainer maxtext, into the MaxText command as
        overrides (its refusals are errors here); with another command, a warning when nothing reads them."""
        settings = fields["settings"]
        if not (fields["maxtext"] or settings or fields["elastic_slices"]):
            return  # nothing to place (and the render path skips importing the MaxText modules)
        from elxpk.maxtext import (
            launcher,  # lazy: keeps elxpk.maxtext, elxpk.maxtext.command ... off `workload create --dry-run`
        )

        if fields["maxtext"] and not fields["headless"]:
            refused = [name for name, _ in settings if any(  # type: ignore[attr-defined]
                e.startswith((flag_name(name) + " ", flag_name(name) + ":")) for e in self.errors)]
            done = launcher.maxtext_command(fields["command"], settings, pathways=bool(fields["pathways"]),  # type: ignore[arg-type]
                                            elastic=int(fields["elastic_slices"]) > 0, refused=refused,  # type: ignore[call-overload]
                                            env=fields["env"])  # type: ignore[arg-type]
            fields["command"] = done.command
            self.errors.extend(done.errors)
            self.warnings.extend(done.warnings)
        elif fields["command"] and not fields["trainer"] and not fields["headless"]:
            self.warnings.extend(launcher.unread_settings_warnings(
                str(fields["command"]), settings, int(fields["elastic_slices"])))  # type: ignore[arg-type, call-overload]

    def pre_start(self, fields: Mapping[str, object]) -> str | None:
        """--checkpoint-pre-start IMAGE: only for a MaxText run with a checkpoint directory to check."""
        if not self.given("checkpoint_pre_start"):
            return None
        image = self.checked("checkpoint_pre_start")  # the image itself: its row's check
        if not fields["maxtext"]:
            self.errors.append("--checkpoint-pre-start: only with --trainer maxtext (the bundled trainer checks "
                               "and quarantines torn steps itself); drop it")
        elif not dict(fields["settings"]).get("checkpoint_dir"):  # type: ignore[call-overload]
            self.errors.append("--checkpoint-pre-start: needs --checkpoint-dir, the MaxText run directory whose "
                               "checkpoints/ it checks; e.g. --checkpoint-dir gs://my-bucket/run-1")
        return image

    def slices(self, pathways: bool) -> dict[str, object]:
        """Slice counts and restart budgets; see docs/launcher.md for how they reach the manifest."""
        err = self.errors.append
        n = self.integer("num_slices") or default("num_slices")
        e = self.integer("elastic_slices") or 0
        if e and e >= n:
            err(f"--elastic-slices {e}: must be below --num-slices ({n}); at least one slice must survive, "
                f"so use 0..{n - 1} or raise --num-slices")
            e = 0
        if e and not pathways:
            err(f"--elastic-slices {e}: needs Pathways; drop --no-pathways or set --elastic-slices 0 "
                f"(multi-controller runs restart as a whole, see --max-restarts)")
            e = 0
        max_slice_restarts = self.integer("max_slice_restarts") or 0
        if e and max_slice_restarts == 0:
            err("--max-slice-restarts 0: an elastic run needs >= 1, otherwise a lost slice is never "
                "restarted and the run fails; use 1 or more")
        elif not e and self.given("max_slice_restarts") and not self.given("elastic_slices"):
            self.warnings.append("--max-slice-restarts only counts with --elastic-slices > 0; without it each "
                                 "slice's Job gets 4 x VMs-per-slice pod restarts, as in xpk")
        return dict(
            num_slices=n, elastic_slices=e, max_slice_restarts=max_slice_restarts,
            max_restarts=self.integer("max_restarts"),
            termination_grace_period_seconds=self.integer("termination_grace_period_seconds"),
            ttl_seconds_after_finished=self.integer("ttl_seconds_after_finished"),
        )

    def containers(self) -> dict[str, object]:
        """Images, container name, Pathways args and env."""
        server_image = self.checked("server_image")
        return dict(
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

    def restart_codes(self, fields: Mapping[str, object]) -> tuple[int, ...]:
        """--restart-on-exit-codes as in xpk: comma-separated exit codes or ranges (e.g. 1,75-77) that restart
        the group (counted) instead of failing the Job at once; sorted, unique."""
        flag, raw = "--restart-on-exit-codes", self.text("restart_on_exit_codes")
        if raw is None:
            return ()
        if fields["headless"]:
            self.errors.append(f"{flag}: a --headless workload has no user container whose exit code it "
                               f"could classify; drop it")
            return ()
        codes: set[int] = set()
        for item in (part.strip() for part in raw.split(",")):
            low, sep, high = item.partition("-")
            try:
                first, last = (int(low, 10), int(high, 10)) if sep else (int(item, 10), int(item, 10))
            except ValueError:
                self.errors.append(f"{flag} {raw!r}: {item!r} is not an exit code; give comma-separated codes "
                                   f"or ranges from 1 to 255, e.g. 1,75-77")
                return ()
            if not 1 <= first <= last <= 255:
                self.errors.append(f"{flag} {raw!r}: {item!r} is outside 1..255 (0 is success, exit codes "
                                   f"end at 255); e.g. 1,75-77")
                return ()
            codes.update(range(first, last + 1))
        return tuple(sorted(codes))

    def trainer_settings(self, n: int, e: int, restarts: int) -> tuple[tuple[str, Any], ...]:
        """The trainer settings given as flags, checked by the contract (elxpk_contract.settings), so the
        launcher refuses exactly what the trainer would, with the same message."""
        err = self.errors.append
        values: dict[str, Any] = {}
        for name in _SETTING_NAMES:
            raw = self.get(name)
            if raw is None:
                continue
            if isinstance(raw, str) and not raw.strip():
                err(f"{flag_name(name)}: empty; give a value or drop the flag")
                continue
            value, problem = check_setting(name, raw)
            if problem:
                err(problem)
            else:
                values[name] = value
        min_count = values.get("elastic_min_slice_count")
        if min_count is not None:
            cross = cross_problems(n, min_count)
            self.errors.extend(cross)
            floor = n - e
            if not cross and slices_waited_for(min_count, n) < floor:  # redundant, not wrong: MaxText accepts it
                self.warnings.append(redundant_min_slice_count(min_count, n, e))
        return tuple(values.items())

    def references(self, command: str | None, env: tuple[tuple[str, str], ...],
                   settings: tuple[tuple[str, Any], ...], *, gpu: bool = False) -> None:
        """Warn about `$(NAME)` in --command/--env that names no env var of the container: Kubernetes
        expands the ones that do, and leaves these as they are (then bash runs `$(NAME)` as a command)."""
        defined = set(RESERVED_ENV) | {key for key, _ in env} | {env_name(name) for name, _ in settings}
        defined |= {env_name(f.name) for f in exposed(LAUNCHER_DERIVED)}
        if gpu:
            from elxpk.create.gpu import GPU_RESERVED_ENV  # lazy: keeps elxpk.create.gpu off a TPU dry-run

            defined |= GPU_RESERVED_ENV
        sources = [("--command", command or "")] + [(f"--env {key}", value) for key, value in env]
        for source, text in sources:
            for name in dict.fromkeys(m.group(1) for m in _K8S_REFERENCE.finditer(text) if m.group(1) is not None):
                if name not in defined:
                    self.warnings.append(
                        f"{source}: $({name}) names no env var of the container, so Kubernetes leaves it as is "
                        f"(bash then runs it as a command); define {name} with --env, or write $$({name}) "
                        f"to silence this")


_SETTING_NAMES = tuple(f.name for f in exposed(LAUNCHER_FLAG))
# The keys parse_create takes: the flag table's (the manifest's and the invocation options) and the
# trainer settings the contract gives the launcher.
_KNOWN_KEYS = SPEC_KEYS | OPTION_KEYS | frozenset(_SETTING_NAMES)


def parse_create(**flags: object) -> tuple[WorkloadSpec, CreateOptions]:
    """Every `workload create` flag validated at once: the spec and the invocation options, or UsageError."""
    return FlagChecker(flags).build()


def spec_from_flags(**flags: object) -> WorkloadSpec:
    """Validate raw flag values into a spec, or raise UsageError with all errors. Only what the manifest
    depends on; the invocation's own options go through `parse_create`."""
    options = sorted(set(flags) & OPTION_KEYS)
    if options:  # a programming error in the caller, not user input
        raise TypeError(f"spec_from_flags got invocation options {options}; use parse_create")
    return FlagChecker(flags).build()[0]

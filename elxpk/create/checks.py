"""Validation of `workload create` flags into a WorkloadSpec: one pass, every error collected.

Raw values arrive as typed on the command line (integers as text), so a bad integer is reported
together with every other problem. Each message is one line: the flag, what is wrong, the fix.
A flag that would be silently ignored in this shape of workload is an error, not a no-op.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from elxpk.admission.image_ref import image_problem
from elxpk.admission.names import flag_problems
from elxpk.create.catalog import UnknownTpuType, lookup
from elxpk.create.flag_values import FlagValues
from elxpk.create.spec import (
    DEFAULT_DOCKER_IMAGE,
    DEFAULT_GCS_LOCATION,
    DEFAULT_PROXY_IMAGE,
    DEFAULT_QUEUE,
    DEFAULT_SERVER_IMAGE,
    PRIORITIES,
    RESERVED_ENV,
    TRAINER_COMMAND,
    TRAINERS,
    CreateOptions,
    WorkloadSpec,
)
from elxpk.errors import UsageError
from elxpk.output_formats import output_problem
from elxpk_contract.settings import (
    LAUNCHER_DERIVED,
    LAUNCHER_FLAG,
    check_setting,
    cross_problems,
    default,
    env_name,
    exposed,
    flag_name,
    redundant_min_slice_count,
)

# `\Z`, not `$`: `$` also matches before a final newline, and "run-1\n" is not a name. Used with .match.
_WORKLOAD_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?\Z")
# Kubernetes expands `$(NAME)` in a container's command, args and env values when NAME is an env var of
# the container, and leaves it as is otherwise; `$$(NAME)` is the escape (kubernetes/pkg/kubelet/container/
# helpers.go ExpandContainerCommandAndArgs, third_party/forked/golang/expansion/expand.go).
_K8S_REFERENCE = re.compile(r"\$\$|\$\(([^)]*)\)")
# Flags that only mean something for a Pathways workload (xpk's `workload create` refuses them too).
_PATHWAYS_ONLY = (("proxy_server_image", "--proxy-server-image"), ("server_image", "--server-image"),
                  ("worker_image", "--worker-image"), ("pathways_gcs_location", "--pathways-gcs-location"),
                  ("custom_proxy_server_args", "--custom-pathways-proxy-server-args"),
                  ("custom_server_args", "--custom-pathways-server-args"),
                  ("custom_worker_args", "--custom-pathways-worker-args"))
# User-container flags that xpk's `create-pathways --headless` accepts and ignores (it renders no user
# container: xpk src/xpk/core/pathways.py get_user_workload_for_pathways): a warning, so xpk scripts run.
_XPK_HEADLESS_IGNORES = (("command", "--command"), ("docker_image", "--docker-image"),
                         ("docker_name", "--docker-name"), ("env", "--env"), ("env_file", "--env-file"))


class FlagChecker(FlagValues):
    """Collects every error (and warning) over one pass through the flags."""

    def outputs(self) -> CreateOptions:
        """How the command runs (dry run, replace, output), apart from the manifest; see CreateOptions."""
        err = self.errors.append
        fmt = self.text("output_format", "--output", "yaml") or "yaml"
        problem = output_problem("manifest", fmt)
        if problem:
            err(problem)
        fmt = fmt.lower()
        dry_run = self.get("dry_run", False)
        server = self.get("dry_run_server", False)
        if dry_run and server:
            err("--dry-run and --dry-run-server: pick one (client-side print, or a server-side dry run)")
        out_file = self.text("output_manifest_file", "--output-manifest-file")
        if out_file is not None:
            from elxpk.outfile import output_problem as path_problem

            problem = path_problem(out_file, "--output-manifest-file", example="manifest.yaml")
            if problem:
                err(problem)
        from elxpk.create.budget_checks import read_times

        times, problems = read_times(step=self.get("step_time"), save=self.get("checkpoint_save_time"),
                                     replacement=self.get("slice_replacement_time"), from_run=self.get("from_run"))
        self.errors.extend(problems)
        return CreateOptions(dry_run="server" if server else ("client" if dry_run else None),
                             replace=bool(self.get("replace", False)), output_format=fmt,
                             output_manifest_file=out_file,
                             slice_mtbf_seconds=self.duration("slice_mtbf", "--slice-mtbf"),
                             step_time_seconds=times.step_s, times=times)

    def budgets(self, fields: Mapping[str, Any], times: Any) -> None:
        """The timeouts and restart budgets against the step, save and replacement times
        (elxpk/create/budget_checks.py): impossible combinations are errors, poor ones warnings."""
        from elxpk.create.budget_checks import Budgets, budget_findings

        given = dict(fields["settings"])

        def setting(name: str) -> Any:
            return given[name] if name in given else default(name)

        budgets = Budgets(
            pathways=bool(fields["pathways"]), elastic=int(fields["elastic_slices"]) > 0,
            has_trainer=not fields["headless"], grace_s=int(fields["termination_grace_period_seconds"]),
            max_slice_restarts=int(fields["max_slice_restarts"]), max_restarts=int(fields["max_restarts"]),
            elastic_timeout_s=setting("elastic_timeout_seconds"),
            elastic_min_slice_count=setting("elastic_min_slice_count"),
            stall_timeout_s=setting("stall_timeout_seconds"), elastic_max_retries=given.get("elastic_max_retries"))
        errors, warnings = budget_findings(budgets, times)
        self.errors.extend(errors)
        self.warnings.extend(warnings)

    def given(self, key: str) -> bool:
        value = self.flags.get(key)
        return value is not None and value is not False and value != [] and value != ()

    def build(self) -> tuple[WorkloadSpec, CreateOptions]:
        unknown = set(self.flags) - _KNOWN_FLAGS
        if unknown:  # a programming error in the caller, not user input
            raise TypeError(f"WorkloadSpec.from_flags got unknown keys: {sorted(unknown)}")
        fields: dict[str, object] = {}
        fields.update(self.identity())
        fields.update(self.shape())
        fields.update(self.slices(bool(fields["pathways"])))
        fields.update(self.containers())
        if self.given("device_type") or self.given("num_nodes"):
            from elxpk.create.gpu import gpu_flag_problems

            fields["num_nodes"] = gpu_flag_problems(self, fields)
        fields["restart_on_exit_codes"] = self.restart_codes(fields)
        self.errors += flag_problems(fields)  # what JobSet and the API server refuse: elxpk/admission/names.py
        n, e, restarts = (int(fields[k]) for k in ("num_slices", "elastic_slices", "max_slice_restarts"))  # type: ignore[call-overload]
        fields["settings"] = self.trainer_settings(n, e, restarts)
        extra = self.flags.get("command")
        if fields["trainer"] and isinstance(extra, str) and extra.strip():
            from elxpk.create.trainer_args import trainer_arg_problems

            self.errors += trainer_arg_problems(extra, dict(fields["settings"]))  # type: ignore[call-overload]
        self.settings_destination(fields)
        options = self.outputs()
        self.budgets(fields, options.times)
        if fields["headless"]:
            fields["env"] = ()  # ignored with a warning (see shape): no user container to carry it
        else:
            self.references(fields["command"], fields["env"], fields["settings"], gpu=fields["gpu"] is not None)  # type: ignore[arg-type]
        if self.errors:
            raise UsageError(*self.errors)
        return WorkloadSpec(**fields, warnings=tuple(self.warnings)), options  # type: ignore[arg-type]

    def identity(self) -> dict[str, object]:
        """Names and labels: workload, TPU type, queue, namespace, priority."""
        err = self.errors.append
        workload = self.text("workload", "--workload") or ""
        if not workload:
            err("--workload: required; name the workload, e.g. --workload my-run-1")
        elif not _WORKLOAD_NAME.fullmatch(workload):  # its length limit depends on the shape: build()
            err(f"--workload {workload!r}: use a-z, 0-9 and '-', starting with a letter and ending with a "
                f"letter or digit (e.g. my-run-1)")
        tpu, gpu = None, None
        tpu_name, gpu_name = self.text("tpu_type", "--tpu-type"), self.text("device_type", "--device-type")
        if tpu_name and gpu_name:
            err("--tpu-type and --device-type: give one (--device-type names a GPU machine, e.g. h100-80gb-8)")
        elif gpu_name:
            from elxpk.create.gpu import UnknownGpuType, lookup_gpu

            try:
                gpu = lookup_gpu(gpu_name)
            except UnknownGpuType as exc:
                err(f"--device-type: {exc}")
        elif not tpu_name:
            err("--tpu-type: required; e.g. --tpu-type v5p-8 or --tpu-type v5litepod-16 (GPUs: --device-type)")
        else:
            try:
                tpu = lookup(tpu_name)
            except UnknownTpuType as exc:
                err(f"--tpu-type: {exc}")
        priority = self.text("priority", "--priority", "medium") or "medium"
        if priority not in PRIORITIES:
            err(f"--priority {priority!r}: use one of {', '.join(PRIORITIES)}")
        queue = self.text("queue", "--queue", DEFAULT_QUEUE) or ""
        if not queue or len(queue) > 63 or not _LABEL_VALUE.match(queue):
            err(f"--queue {queue!r}: must be a Kubernetes label value (at most 63 letters, digits, '-', '_', "
                f"'.'); name your Kueue LocalQueue, e.g. {DEFAULT_QUEUE}")
        namespace = self.text("namespace", "--namespace", "default") or ""
        if len(namespace) > 63 or not _DNS_LABEL.match(namespace):
            err(f"--namespace {namespace!r}: must be an RFC 1123 label (a-z, 0-9, '-', at most 63 characters)")
        return dict(workload=workload, tpu=tpu, gpu=gpu, priority=priority, queue=queue, namespace=namespace)

    def shape(self) -> dict[str, object]:
        """Pathways or multi-controller, headless or not, user command or bundled trainer."""
        err = self.errors.append
        gpu = self.given("device_type")  # Pathways runs on TPUs only: a GPU workload is multi-controller
        pathways = not bool(self.get("no_pathways", False)) and not gpu
        multi = "--device-type (Pathways runs on TPUs only)" if gpu else "--no-pathways"
        headless = bool(self.get("headless", False))
        kind = self.trainer_kind()
        trainer, maxtext = kind == "elxpk", kind == "maxtext"
        command = self.text("command", "--command")
        if command is not None and not command.strip():
            command = None
        if headless and not pathways:
            err(f"--headless: only with Pathways (it drops the user container); drop {multi} or --headless")
        elif headless:
            if kind:
                err(f"--trainer {kind}: needs the user container that --headless drops; drop one of them")
            for key, flag in _XPK_HEADLESS_IGNORES:  # xpk ignores them; so do we, aloud
                if self.given(key):
                    self.warnings.append(f"{flag}: ignored, a --headless workload has no user container "
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
            for key, flag in _PATHWAYS_ONLY:
                if self.given(key):
                    err(f"{flag}: only for Pathways workloads; drop it or drop {multi}")
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
        from elxpk.maxtext import launcher

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

    def slices(self, pathways: bool) -> dict[str, object]:
        """Slice counts and restart budgets; see docs/launcher.md for how they reach the manifest."""
        err = self.errors.append
        num_slices = self.integer("num_slices", "--num-slices", 1, low=1, fix="TPU slices to run on")
        n = num_slices if num_slices is not None else 1
        e = self.integer("elastic_slices", "--elastic-slices", 0, low=0,
                         fix="slices Pathways may lose; 0 disables elasticity") or 0
        if e and e >= n:
            err(f"--elastic-slices {e}: must be below --num-slices ({n}); at least one slice must survive, "
                f"so use 0..{n - 1} or raise --num-slices")
            e = 0
        if e and not pathways:
            err(f"--elastic-slices {e}: needs Pathways; drop --no-pathways or set --elastic-slices 0 "
                f"(multi-controller runs restart as a whole, see --max-restarts)")
            e = 0
        max_slice_restarts = self.integer("max_slice_restarts", "--max-slice-restarts", 1, low=0,
                                          fix="pod restarts each slice may use") or 0
        if e and max_slice_restarts == 0:
            err("--max-slice-restarts 0: an elastic run needs >= 1, otherwise a lost slice is never "
                "restarted and the run fails; use 1 or more")
        elif not e and self.given("max_slice_restarts") and not self.given("elastic_slices"):
            self.warnings.append("--max-slice-restarts only counts with --elastic-slices > 0; without it each "
                                 "slice's Job gets 4 x VMs-per-slice pod restarts, as in xpk")
        return dict(
            num_slices=n, elastic_slices=e, max_slice_restarts=max_slice_restarts,
            max_restarts=self.integer("max_restarts", "--max-restarts", 0, low=0,
                                      fix="whole-JobSet restarts; 0 = fail on the first group failure"),
            termination_grace_period_seconds=self.integer(
                "termination_grace_period_seconds", "--termination-grace-period-seconds", 30, low=0,
                fix="seconds a pod gets to exit after SIGTERM"),
            ttl_seconds_after_finished=self.integer("ttl_seconds_after_finished", "--ttl-seconds-after-finished",
                                                    43200, low=0, fix="seconds a finished JobSet is kept"),
        )

    def containers(self) -> dict[str, object]:
        """Images, container name, Pathways args and env."""
        err = self.errors.append
        for key, flag in (("docker_image", "--docker-image"), ("proxy_server_image", "--proxy-server-image"),
                          ("server_image", "--server-image"), ("worker_image", "--worker-image")):
            image = self.text(key, flag)
            if image is not None and (problem := image_problem(image)):
                err(f"{flag} {image!r}: {problem}; e.g. gcr.io/my-project/my-image:tag (the kubelet would "
                    "refuse it as InvalidImageName)")
        docker_name = self.text("docker_name", "--docker-name", "jax-tpu") or ""
        if len(docker_name) > 63 or not _DNS_LABEL.match(docker_name):
            err(f"--docker-name {docker_name!r}: a container name is an RFC 1123 label (a-z, 0-9, '-'), "
                f"e.g. jax-tpu")
        gcs = self.text("pathways_gcs_location", "--pathways-gcs-location", DEFAULT_GCS_LOCATION) or ""
        if not gcs.startswith("gs://") or any(c.isspace() for c in gcs):
            err(f"--pathways-gcs-location {gcs!r}: must be a gs:// URL with no spaces, e.g. {DEFAULT_GCS_LOCATION}")
        server_image = self.text("server_image", "--server-image") or DEFAULT_SERVER_IMAGE
        return dict(
            docker_image=self.text("docker_image", "--docker-image") or DEFAULT_DOCKER_IMAGE,
            docker_name=docker_name,
            proxy_server_image=self.text("proxy_server_image", "--proxy-server-image") or DEFAULT_PROXY_IMAGE,
            server_image=server_image,
            worker_image=self.text("worker_image", "--worker-image") or server_image,
            pathways_gcs_location=gcs,
            custom_proxy_server_args=self.args("custom_proxy_server_args", "--custom-pathways-proxy-server-args"),
            custom_server_args=self.args("custom_server_args", "--custom-pathways-server-args"),
            custom_worker_args=self.args("custom_worker_args", "--custom-pathways-worker-args"),
            env=self.env(),
        )

    def restart_codes(self, fields: Mapping[str, object]) -> tuple[int, ...]:
        """--restart-on-exit-codes as in xpk: comma-separated exit codes or ranges (e.g. 1,75-77) that restart
        the group (counted) instead of failing the Job at once; sorted, unique."""
        flag, raw = "--restart-on-exit-codes", self.text("restart_on_exit_codes", "--restart-on-exit-codes")
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
            if not cross and min_count != -1 and min_count < floor:  # redundant, not wrong: MaxText accepts it
                self.warnings.append(redundant_min_slice_count(min_count, n, e))
        return tuple(values.items())

    def references(self, command: str | None, env: tuple[tuple[str, str], ...],
                   settings: tuple[tuple[str, Any], ...], *, gpu: bool = False) -> None:
        """Warn about `$(NAME)` in --command/--env that names no env var of the container: Kubernetes
        expands the ones that do, and leaves these as they are (then bash runs `$(NAME)` as a command)."""
        defined = set(RESERVED_ENV) | {key for key, _ in env} | {env_name(name) for name, _ in settings}
        defined |= {env_name(f.name) for f in exposed(LAUNCHER_DERIVED)}
        if gpu:
            from elxpk.create.gpu import GPU_RESERVED_ENV

            defined |= GPU_RESERVED_ENV
        sources = [("--command", command or "")] + [(f"--env {key}", value) for key, value in env]
        for flag, text in sources:
            for name in dict.fromkeys(m.group(1) for m in _K8S_REFERENCE.finditer(text) if m.group(1) is not None):
                if name not in defined:
                    self.warnings.append(
                        f"{flag}: $({name}) names no env var of the container, so Kubernetes leaves it as is "
                        f"(bash then runs it as a command); define {name} with --env, or write $$({name}) "
                        f"to silence this")


_SETTING_NAMES = tuple(f.name for f in exposed(LAUNCHER_FLAG))
# The invocation options of `workload create` (see CreateOptions): they never change the manifest.
OPTION_FLAGS = frozenset("dry_run dry_run_server replace output_format output_manifest_file slice_mtbf "
                         "step_time checkpoint_save_time slice_replacement_time from_run".split())
_KNOWN_FLAGS = frozenset(
    "workload tpu_type device_type num_nodes num_slices command docker_image docker_name no_pathways headless trainer "
    "elastic_slices max_slice_restarts max_restarts priority queue namespace termination_grace_period_seconds "
    "ttl_seconds_after_finished proxy_server_image server_image worker_image pathways_gcs_location "
    "custom_proxy_server_args custom_server_args custom_worker_args env env_file restart_on_exit_codes".split()
) | OPTION_FLAGS | frozenset(_SETTING_NAMES)

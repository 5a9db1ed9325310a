"""The one typed, frozen source of truth for `elxpk workload create`.

`WorkloadSpec.from_flags(...)` takes the raw flag values (strings as typed, so that every bad integer
is reported together with every other error, not one at a time by the parser), validates all of
them before any I/O, and raises one `UsageError` carrying one line per problem, each naming the
flag and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from elxpk.catalog import TpuType, UnknownTpuType, lookup
from elxpk.errors import UsageError

PRIORITIES = ("very-low", "low", "medium", "high", "very-high")
DEFAULT_PROXY_IMAGE = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:latest"
DEFAULT_SERVER_IMAGE = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:latest"
DEFAULT_GCS_LOCATION = "gs://cloud-pathways-staging/tmp"
DEFAULT_DOCKER_IMAGE = "python:3.10"  # xpk's --base-docker-image default
DEFAULT_QUEUE = "multislice-queue"  # the LocalQueue an xpk-made cluster has
TRAINER_COMMAND = "python -m trainer"
# Env names the rendered manifest sets itself; a user value would silently shadow or be shadowed.
RESERVED_ENV = frozenset({"JAX_PLATFORMS", "JAX_BACKEND_TARGET", "PATHWAYS_HEAD", "XCLOUD_ENVIRONMENT",
                          "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID"})

_WORKLOAD_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SURROGATE = re.compile("[\ud800-\udfff]")
ELASTIC_KNOBS_HELP = (
    "--elastic-slices is server-side tolerance (how many slices Pathways may lose without failing the "
    "program); --elastic-min-slice-count is client-side admission (how many healthy slices the trainer "
    "waits for before each attempt; -1 = all, i.e. pause and resume)"
)


@dataclass(frozen=True)
class WorkloadSpec:
    """Everything `workload create` was asked for, validated. Times are in seconds."""

    workload: str
    tpu: TpuType
    num_slices: int = 1
    command: str | None = None  # the user's shell command; with --trainer, the trainer command line
    docker_image: str = DEFAULT_DOCKER_IMAGE
    docker_name: str = "jax-tpu"
    pathways: bool = True
    headless: bool = False
    trainer: bool = False
    elastic_slices: int = 0
    max_slice_restarts: int = 1
    max_restarts: int = 0
    priority: str = "medium"
    queue: str = DEFAULT_QUEUE
    namespace: str = "default"
    termination_grace_period_seconds: int = 30
    ttl_seconds_after_finished: int = 43200
    proxy_server_image: str = DEFAULT_PROXY_IMAGE
    server_image: str = DEFAULT_SERVER_IMAGE
    worker_image: str = DEFAULT_SERVER_IMAGE
    pathways_gcs_location: str = DEFAULT_GCS_LOCATION
    custom_proxy_server_args: tuple[str, ...] = ()
    custom_server_args: tuple[str, ...] = ()
    custom_worker_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    checkpoint_dir: str | None = None
    checkpoint_period: int | None = None
    elastic_min_slice_count: int = -1
    elastic_timeout_seconds: int | None = None
    elastic_max_retries: int | None = None
    slice_mtbf_seconds: float | None = None
    step_time_seconds: float | None = None
    dry_run: str | None = None  # None (submit), "client" (print only) or "server" (server-side dry run)
    replace: bool = False
    output_format: str = "yaml"
    output_manifest_file: str | None = None
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def elastic(self) -> bool:
        return self.elastic_slices > 0

    @property
    def worker_backoff_limit(self) -> int:
        """xpk's formula, inherited from the PathwaysJob controller: pod restarts a slice's Job tolerates."""
        vms = self.tpu.vms_per_slice
        return self.max_slice_restarts * vms if self.elastic else 4 * vms

    @property
    def slice_backend(self) -> str:
        return "pathways" if self.pathways else "multi-controller"

    @classmethod
    def from_flags(cls, **flags: object) -> WorkloadSpec:
        """Validate raw flag values (see `_Checker`) into a spec, or raise UsageError with every error."""
        return _Checker(flags).build()


class _Checker:
    """Collects every error (and warning) over one pass through the flags."""

    def __init__(self, flags: Mapping[str, object]) -> None:
        self.flags = dict(flags)
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def get(self, key: str, default: object = None) -> object:
        value = self.flags.get(key)
        return default if value is None else value

    def text(self, key: str, flag: str, default: str | None = None) -> str | None:
        value = self.get(key, default)
        if value is None:
            return None
        value = str(value)
        if _SURROGATE.search(value):
            self.errors.append(f"{flag}: the value is not valid UTF-8 text; pass it as UTF-8")
        return value

    def integer(self, key: str, flag: str, default: int | None, *, low: int | None = None,
                high: int | None = None, fix: str = "") -> int | None:
        """`fix` says what the number means; it ends the message in parentheses."""
        raw = self.get(key)
        if raw is None:
            return default
        bounds = "" if low is None else (f" >= {low}" if high is None else f" from {low} to {high}")
        why = f" ({fix})" if fix else ""
        try:
            value = raw if isinstance(raw, int) and not isinstance(raw, bool) else int(str(raw).strip(), 10)
        except ValueError:
            self.errors.append(f"{flag} {raw!r}: not an integer; pass a whole number{bounds}{why}")
            return default
        if (low is not None and value < low) or (high is not None and value > high):
            self.errors.append(f"{flag} {value}: must be{bounds}{why}")
            return default
        return value

    def duration(self, key: str, flag: str) -> float | None:
        raw = self.get(key)
        if raw is None:
            return None
        from elxpk.units import parse_duration

        try:
            seconds = parse_duration(raw)  # type: ignore[arg-type]
        except ValueError as exc:
            self.errors.append(f"{flag}: {exc}; e.g. 90s, 30m, 4h or 7d")
            return None
        if seconds <= 0:
            self.errors.append(f"{flag} {raw!r}: must be positive; e.g. 90s, 30m, 4h or 7d")
            return None
        return seconds

    def args(self, key: str, flag: str) -> tuple[str, ...]:
        raw = self.text(key, flag)
        if not raw:
            return ()
        import shlex

        try:
            return tuple(shlex.split(raw))
        except ValueError as exc:
            self.errors.append(f"{flag}: {exc} in {raw!r}; balance the quotes (arguments split like a shell)")
            return ()

    def env(self) -> tuple[tuple[str, str], ...]:
        pairs: dict[str, str] = {}
        lines = (line.strip() for line in self.env_file_lines())
        sources: list[tuple[str, object]] = [("--env-file", x) for x in lines if x and not x.startswith("#")]
        sources += [("--env", x) for x in _seq(self.get("env"))]
        for flag, item in sources:
            item = str(item)
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep:
                self.errors.append(f"{flag} {item!r}: expected KEY=VALUE")
            elif not _ENV_KEY.match(key):
                self.errors.append(f"{flag} {key!r}: env names are letters, digits and '_', not starting "
                                   f"with a digit; rename it (e.g. MY_VAR)")
            elif key in RESERVED_ENV:
                self.errors.append(f"{flag} {key}: set by elxpk itself; drop it")
            elif key.startswith("ELXPK_"):
                self.errors.append(f"{flag} {key}: trainer settings have their own flags "
                                   f"(--checkpoint-dir, --checkpoint-period, --elastic-*); use those")
            elif _SURROGATE.search(value):
                self.errors.append(f"{flag} {key}: the value is not valid UTF-8 text; pass it as UTF-8")
            else:
                pairs[key] = value  # later wins: --env overrides --env-file
        return tuple(pairs.items())

    def env_file_lines(self) -> list[str]:
        path = self.text("env_file", "--env-file")
        if not path:
            return []
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            self.errors.append(f"--env-file {path!r}: cannot read it ({reason}); give a readable KEY=VALUE file")
            return []

    def outputs(self) -> dict[str, object]:
        err = self.errors.append
        fmt = (self.text("output_format", "--output", "yaml") or "yaml").lower()
        if fmt not in ("yaml", "json"):
            err(f"--output {fmt!r}: use yaml or json")
        dry_run = self.get("dry_run", False)
        server = self.get("dry_run_server", False)
        if dry_run and server:
            err("--dry-run and --dry-run-server: pick one (client-side print, or a server-side dry run)")
        out_file = self.text("output_manifest_file", "--output-manifest-file")
        if out_file is not None:
            import os

            parent = os.path.dirname(os.path.abspath(out_file)) if out_file else ""
            if not out_file or os.path.isdir(out_file):
                err(f"--output-manifest-file {out_file!r}: give a file path, e.g. manifest.yaml")
            elif not os.path.isdir(parent):
                err(f"--output-manifest-file {out_file!r}: directory {parent!r} does not exist; create it first")
        return dict(dry_run="server" if server else ("client" if dry_run else None),
                    replace=bool(self.get("replace", False)), output_format=fmt, output_manifest_file=out_file)

    def build(self) -> WorkloadSpec:
        unknown = set(self.flags) - _KNOWN_FLAGS
        if unknown:  # a programming error in the caller, not user input
            raise TypeError(f"WorkloadSpec.from_flags got unknown keys: {sorted(unknown)}")
        err = self.errors.append
        workload = self.text("workload", "--workload") or ""
        if not workload:
            err("--workload: required; name the workload, e.g. --workload my-run-1")
        elif len(workload) > 40 or not _WORKLOAD_NAME.match(workload):
            err(f"--workload {workload!r}: use at most 40 characters of a-z, 0-9 and '-', starting with a "
                f"letter and ending with a letter or digit (e.g. my-run-1)")
        tpu = None
        tpu_name = self.text("tpu_type", "--tpu-type")
        if not tpu_name:
            err("--tpu-type: required; e.g. --tpu-type v5p-8 or --tpu-type v5litepod-16")
        else:
            try:
                tpu = lookup(tpu_name)
            except UnknownTpuType as exc:
                err(f"--tpu-type: {exc}")

        pathways = not bool(self.get("no_pathways", False))
        headless = bool(self.get("headless", False))
        trainer = bool(self.get("trainer", False))
        num_slices = self.integer("num_slices", "--num-slices", 1, low=1, fix="TPU slices to run on")
        n = num_slices if num_slices is not None else 1
        elastic_slices = self.integer("elastic_slices", "--elastic-slices", 0, low=0,
                                      fix="slices Pathways may lose; 0 disables elasticity")
        e = elastic_slices or 0
        if e and e >= n:
            err(f"--elastic-slices {e}: must be below --num-slices ({n}); at least one slice must survive, "
                f"so use 0..{n - 1} or raise --num-slices")
            e = 0
        if e and not pathways:
            err(f"--elastic-slices {e}: needs Pathways; drop --no-pathways or set --elastic-slices 0 "
                f"(multi-controller runs restart as a whole, see --max-restarts)")
            e = 0
        max_slice_restarts = self.integer("max_slice_restarts", "--max-slice-restarts", 1, low=0,
                                          fix="pod restarts each slice may use")
        if e and max_slice_restarts == 0:
            err("--max-slice-restarts 0: an elastic run needs >= 1, otherwise a lost slice is never "
                "restarted and the run fails; use 1 or more")
        max_restarts = self.integer("max_restarts", "--max-restarts", 0, low=0,
                                    fix="whole-JobSet restarts; 0 = fail on the first group failure")
        grace = self.integer("termination_grace_period_seconds", "--termination-grace-period-seconds", 30,
                             low=0, fix="seconds a pod gets to exit after SIGTERM")
        ttl = self.integer("ttl_seconds_after_finished", "--ttl-seconds-after-finished", 43200, low=0,
                           fix="seconds a finished JobSet is kept")
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

        command = self.text("command", "--command")
        if command is not None and not command.strip():
            command = None
        if trainer:
            command = TRAINER_COMMAND + (f" {command}" if command else "")
        if command is None and not headless:
            err("--command: required unless --headless (Pathways without a user container) or --trainer; "
                "e.g. --command 'python3 train.py'")
        if headless and not pathways:
            err("--headless: only with Pathways (it drops the user container); drop --no-pathways or --headless")
        if headless and trainer:
            err("--trainer: needs the user container that --headless drops; drop one of them")
        elif headless and self.get("command"):
            err("--command: a --headless workload has no user container to run it in; drop --command")
        docker_image = self.text("docker_image", "--docker-image")
        docker_name = self.text("docker_name", "--docker-name", "jax-tpu") or ""
        if len(docker_name) > 63 or not _DNS_LABEL.match(docker_name):
            err(f"--docker-name {docker_name!r}: a container name is an RFC 1123 label (a-z, 0-9, '-'), e.g. jax-tpu")
        if trainer and not docker_image:
            err("--trainer: needs --docker-image, an image built from trainer/Dockerfile (elxpk[trainer] installed)")
        for key, flag in (("docker_image", "--docker-image"), ("proxy_server_image", "--proxy-server-image"),
                          ("server_image", "--server-image"), ("worker_image", "--worker-image")):
            image = self.text(key, flag)
            if image is not None and (not image.strip() or any(c.isspace() for c in image)):
                err(f"{flag} {image!r}: an image reference has no spaces; e.g. gcr.io/my-project/my-image:tag")
        server_image = self.text("server_image", "--server-image") or DEFAULT_SERVER_IMAGE
        gcs = self.text("pathways_gcs_location", "--pathways-gcs-location", DEFAULT_GCS_LOCATION) or ""
        if not gcs.startswith("gs://") or any(c.isspace() for c in gcs):
            err(f"--pathways-gcs-location {gcs!r}: must be a gs:// URL with no spaces, e.g. {DEFAULT_GCS_LOCATION}")

        checkpoint_period = self.integer("checkpoint_period", "--checkpoint-period", None, low=1,
                                         fix="steps between checkpoints, e.g. 100")
        min_count = self.integer("elastic_min_slice_count", "--elastic-min-slice-count", -1,
                                 fix="-1 waits for all slices")
        if min_count is not None and min_count != -1:
            floor = n - e
            if not 1 <= min_count <= n - 1:
                err(f"--elastic-min-slice-count {min_count}: use -1 (wait for all {n} slices) or 1..{n - 1}")
            elif min_count < floor:
                hint = f"use {floor}..{n - 1} or -1" if floor <= n - 1 else "use -1 or raise --elastic-slices"
                err(f"--elastic-min-slice-count {min_count}: below num_slices - elastic_slices = {floor}; "
                    f"the trainer would wait for slices that Pathways will not give back "
                    f"({ELASTIC_KNOBS_HELP}); {hint}")
        timeout = self.integer("elastic_timeout_seconds", "--elastic-timeout-seconds", None, low=1,
                               fix="seconds to wait for slices on each attempt, e.g. 300")
        max_retries = self.integer("elastic_max_retries", "--elastic-max-retries", None, low=1,
                                   fix="trainer attempts, e.g. 10")
        if e and max_retries is not None and max_slice_restarts and max_retries != max_slice_restarts:
            self.warnings.append(
                f"--elastic-max-retries {max_retries} and --max-slice-restarts {max_slice_restarts} disagree: "
                f"the trainer gives up after {max_retries} attempts while each slice may restart "
                f"{max_slice_restarts} times; keep them equal unless you mean it")

        spec_kwargs = dict(
            workload=workload, tpu=tpu, num_slices=n, command=command,
            docker_image=docker_image or DEFAULT_DOCKER_IMAGE,
            docker_name=docker_name,
            pathways=pathways, headless=headless, trainer=trainer, elastic_slices=e,
            max_slice_restarts=max_slice_restarts, max_restarts=max_restarts, priority=priority, queue=queue,
            namespace=namespace, termination_grace_period_seconds=grace, ttl_seconds_after_finished=ttl,
            proxy_server_image=self.text("proxy_server_image", "--proxy-server-image", DEFAULT_PROXY_IMAGE),
            server_image=server_image,
            worker_image=self.text("worker_image", "--worker-image") or server_image,
            pathways_gcs_location=gcs,
            custom_proxy_server_args=self.args("custom_proxy_server_args", "--custom-pathways-proxy-server-args"),
            custom_server_args=self.args("custom_server_args", "--custom-pathways-server-args"),
            custom_worker_args=self.args("custom_worker_args", "--custom-pathways-worker-args"),
            env=self.env(),
            checkpoint_dir=self.text("checkpoint_dir", "--checkpoint-dir"),
            checkpoint_period=checkpoint_period, elastic_min_slice_count=min_count,
            elastic_timeout_seconds=timeout, elastic_max_retries=max_retries,
            slice_mtbf_seconds=self.duration("slice_mtbf", "--slice-mtbf"),
            step_time_seconds=self.duration("step_time", "--step-time"),
            **self.outputs(),
        )
        if spec_kwargs["checkpoint_dir"] is not None and not spec_kwargs["checkpoint_dir"].strip():
            err("--checkpoint-dir: empty; give a directory, e.g. gs://my-bucket/run-1/checkpoints")
        if self.errors:
            raise UsageError(*self.errors)
        return WorkloadSpec(**spec_kwargs, warnings=tuple(self.warnings))  # type: ignore[arg-type]


_KNOWN_FLAGS = frozenset(
    "workload tpu_type num_slices command docker_image docker_name no_pathways headless trainer "
    "elastic_slices max_slice_restarts max_restarts priority queue namespace termination_grace_period_seconds "
    "ttl_seconds_after_finished proxy_server_image server_image worker_image pathways_gcs_location "
    "custom_proxy_server_args custom_server_args custom_worker_args env env_file checkpoint_dir "
    "checkpoint_period elastic_min_slice_count elastic_timeout_seconds elastic_max_retries slice_mtbf "
    "step_time dry_run dry_run_server replace output_format output_manifest_file".split()
)


def _seq(value: object) -> Iterable[object]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)):
        return (value,)
    return value  # type: ignore[return-value]

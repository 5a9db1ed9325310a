"""The launcher's flag table: every flag of `workload create` declared once, with its type, default,
bounds, choices, help and help panel (the trainer's settings have their own table, elxpk_contract/settings.py).

Everything else reads it: the Typer parameters of `workload create` and `workload validate`
(elxpk/cli/options.py `with_flags`: help with the bounds and the default), the defaults of WorkloadSpec
and CreateOptions (elxpk/create/spec.py), the per-flag checks (elxpk/flag_rows.py `read_all` reads a
row's kind, bounds and choices, as for every command; elxpk/create/flag_values.py adds a text row's
`required` and `check`, the last from elxpk/create/flag_checks.py; FlagChecker in elxpk/create/checks.py
keeps only the rules that tie several flags together), the keys
`parse_create` accepts, and the flag table in docs/launcher.md (`embed`; tests/launcher/test_flag_table.py holds --help,
the checks and the page to the rows). Standard library only: the table is read on every
`workload create --dry-run`.
"""

from __future__ import annotations

from typing import Any

from elxpk import flag_rows, timing_flags
from elxpk.admission.names import MAX_INT32, MAX_INT64
from elxpk.create.capacity import MAX_RUN_DURATION_S
from elxpk.flag_rows import (
    BOOL,
    DURATION,
    GCLUSTER,
    INPUT,
    INT,
    LIST,
    TEXT,
    Alias,
    Flag,
    alias_pairs,
    setting_row,
)
from elxpk_contract.setting_rules import LAUNCHER_FLAG, SECONDS, Setting, env_name, exposed

# Help panels of `workload create --help`; None is Typer's plain "Options" panel.
PATHWAYS = "Pathways"
TIMES = timing_flags.PANEL
TRAINER = "Trainer settings (env ELXPK_* on the training container)"
OUTPUT = "Output and submission"
GCLUSTER_PANEL = "gcluster's spellings (any of them brings gcluster's defaults)"
CAPACITY = "Capacity (one of; default: whatever the node pools offer)"

PRIORITIES = ("very-low", "low", "medium", "high", "very-high")
TRAINERS = ("elxpk", "maxtext")  # the values of --trainer: the bundled trainer, or a MaxText --command
DEFAULT_PROXY_IMAGE = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:latest"
DEFAULT_SERVER_IMAGE = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:latest"
DEFAULT_GCS_LOCATION = "gs://cloud-pathways-staging/tmp"
DEFAULT_DOCKER_IMAGE = "python:3.10"  # xpk's --base-docker-image default
DEFAULT_QUEUE = "multislice-queue"  # the LocalQueue an xpk-made cluster has

# Env names the rendered manifest sets itself: --env and --env-file refuse them, since a user value would
# silently shadow or be shadowed.
RESERVED_ENV = frozenset({"JAX_PLATFORMS", "JAX_BACKEND_TARGET", "PATHWAYS_HEAD", "XCLOUD_ENVIRONMENT",
                          "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID", "ELXPK_RUN_ID"})
# Likewise for the Pathways containers' own env (--pathways-{proxy,server,worker}-env): each one's names in
# templates/pathways.yaml.j2.
PATHWAYS_RESERVED_ENV = {
    "pathways_proxy_env": frozenset({"PATHWAYS_HEAD"}),
    "pathways_server_env": frozenset({"REPLICATED_JOB_NAME", "JOBSET_NAME", "HOST_ADDRESS", "TPU_SKIP_MDS_QUERY"}),
    "pathways_worker_env": frozenset({"TPU_MIN_LOG_LEVEL", "TF_CPP_MIN_LOG_LEVEL", "XCLOUD_ENVIRONMENT",
                                      "MEGASCALE_GRPC_ENABLE_XOR_TRACER", "MEGASCALE_NUM_SLICES", "JOBSET_NAME",
                                      "REPLICATED_JOB_NAME", "MEGASCALE_SLICE_ID", "PATHWAYS_HEAD",
                                      "MEGASCALE_COORDINATOR_ADDRESS"}),
}


_BOTH = ("create", "validate")
_SPLIT = "gcluster splits it on whitespace, elxpk like a shell (the same for unquoted text)"

FLAGS: tuple[Flag, ...] = (
    Flag('workload', TEXT, "JobSet name: a-z, 0-9, '-', starting with a letter; at most 39 characters "
         'for Pathways (the limit of each shape is checked).',
         required='name the workload, e.g. {flag} my-run-1', check='workload_name',
         doc='JobSet name: `a-z`, `0-9` and `-`, starting with a letter; at most 39 characters for '
         'Pathways, fewer for `--no-pathways` with many slices (see '
         '[Admission](#admission-what-the-cluster-would-refuse))', doc_default='required',
         aliases=(Alias('--name', submit_short='-n', note='at most 28 characters, 22 with --pathways '
                        "(gcluster's limits)"),)),
    Flag('tpu_type', TEXT, 'TPU slice type, e.g. v5p-8, v5p-2x2x2, v5litepod-16, v6e-16, tpu7x-8.',
         required='e.g. --tpu-type v5p-8 or --tpu-type v5litepod-16 (GPUs: --device-type)',
         doc='`v5p-16` or `v5p-2x2x2`; v4, v5e (`v5litepod-*`), v5p, v6e, tpu7x (see the catalog below)',
         doc_default='required'),
    # A trainer setting (its ELXPK_NUM_SLICES is rendered from it): read by the contract's rule, as every command
    # that takes it and the trainer read it.
    setting_row('num_slices', default=1, commands=('create',), extra=' (TPU slices: worker replicas)',
                doc="worker replicas, and the resource manager's `--instance_count`"),
    Flag('device_type', TEXT, 'GPU machine instead of --tpu-type, as in xpk: h100-80gb-8 (A3 High), '
         'h100-mega-80gb-8 (A3 Mega), h200-141gb-8 (A3 Ultra), b200-8 (A4), or the GCE machine type. A '
         "multi-controller JobSet with the machine's GPUDirect networking (docs/gpu.md). A TPU type here "
         "(v5litepod-16) is --tpu-type, as in xpk.",
         doc='a GPU machine instead of `--tpu-type`: `h100-80gb-8`, `h100-mega-80gb-8`, `h200-141gb-8`, '
         "`b200-8` (or the GCE machine type); a multi-controller JobSet as xpk renders it "
         '([docs/gpu.md](gpu.md)). A TPU type here (`v5litepod-16`) is `--tpu-type`, as in xpk'),
    Flag('num_nodes', INT, 'GPU machines in the node group (pods, 8 GPUs each); with --device-type.',
         default=1, low=1, high=MAX_INT32,
         fix="GPU machines in the node group; the Job's parallelism is a 32-bit integer"),
    Flag('command', TEXT, 'Shell command the user container runs; required unless --headless or '
         '--trainer (elxpk), where it holds extra trainer arguments. With --trainer maxtext: the MaxText '
         'command.',
         doc='shell command of the user container; with `--trainer`, extra trainer arguments; with '
         '`--trainer maxtext`, the MaxText command', doc_default='required unless `--headless`/`--trainer`',
         short='-e', free_text=True),  # gcluster's -e, in both verbs (elxpk has no other -e)
    Flag('docker_image', TEXT, 'Image of the user container.', default=DEFAULT_DOCKER_IMAGE, check='image',
         aliases=(Alias('--image', short='-i'),)),
    Flag('docker_name', TEXT, 'Name of the user container.', default='jax-tpu', check='container_name'),
    Flag('trainer', TEXT, 'Which trainer the user container runs. --trainer (or --trainer elxpk): the '
         'bundled trainer (python -m trainer; needs --docker-image built from trainer/Dockerfile). '
         '--trainer maxtext: --command runs MaxText, and the trainer settings become MaxText key=value '
         'overrides after its config file (docs/maxtext.md).', choices=TRAINERS, metavar='[elxpk|maxtext]',
         fix='--trainer alone (or --trainer elxpk) for the bundled trainer, --trainer maxtext for a MaxText --command',
         doc='`--trainer` alone (or `--trainer elxpk`): run the bundled trainer, the command becomes '
         '`python -m trainer [--command]`; needs `--docker-image`. `--trainer maxtext`: `--command` runs '
         'MaxText, and the trainer settings become MaxText `key=value` overrides after its config file '
         '([docs/maxtext.md](maxtext.md))', doc_default='off'),
    Flag('no_pathways', BOOL, 'Multi-controller JobSet: the command runs on every VM of every slice; '
         'failures restart the whole group (--max-restarts).', default=False,
         doc='multi-controller JobSet (the command runs on every VM of every slice)'),
    Flag('headless', BOOL, 'Pathways without a user container: proxy and resource manager only; connect '
         'your own client.', default=False, panel=PATHWAYS,
         doc='Pathways with no user container: proxy and resource manager become plain containers; no '
         '`successPolicy`', aliases=(Alias('--pathways-headless'),)),
    Flag('elastic_slices', INT, 'Slices Pathways may lose without failing the program (server-side '
         'tolerance), passed to the proxy as --num_elastic_slices. 0 disables elasticity; must be below '
         "--num-slices. Not the same knob as --elastic-min-slice-count (the trainer's side; with Pathways "
         'at least num_slices - elastic_slices).', default=0, panel=PATHWAYS, low=0,
         fix='slices Pathways may lose; 0 disables elasticity',
         doc='slices Pathways may lose: proxy arg `--num_elastic_slices`',
         aliases=(Alias('--pathways-elastic-slices'),)),
    Flag('max_slice_restarts', INT, 'Pod restarts each slice may use when elastic: worker backoffLimit = '
         'this x VMs per slice (else 4 x VMs per slice), as in xpk.', default=1, panel=PATHWAYS, low=0,
         high=MAX_INT32, fix='pod restarts each slice may use; x VMs per slice, a 32-bit backoffLimit',
         doc='pod restarts per slice (worker `backoffLimit`, below)',
         aliases=(Alias('--pathways-max-slice-restarts'),)),
    Flag('max_restarts', INT, 'Whole-JobSet restarts (failurePolicy.maxRestarts), honoured for Pathways too.',
         default=0, low=0, fix='whole-JobSet restarts; 0 = fail on the first group failure',
         doc='JobSet `failurePolicy.maxRestarts` (xpk drops it for Pathways; elxpk keeps it)',
         aliases=(Alias('--restarts', default='1'),)),
    Flag('restart_on_exit_codes', TEXT, 'As in xpk: comma-separated exit codes or ranges (e.g. 1,75-77) '
         'of the user container that restart the workload (counted against the budgets) instead of '
         "failing it at once; every other code except xpk's (42, 127-255) and the trainer's retryable "
         'ones then fails it. See docs/launcher.md.', metavar='CODES',
         doc='as in xpk: comma-separated exit codes or ranges (`1,75-77`) of the user container that '
         'restart the workload (counted) instead of failing it; every other code fails it at once '
         '([Failure classification](#failure-classification-the-exit-code-table-rendered))'),
    Flag('priority', TEXT, 'PriorityClass: very-low, low, medium, high, very-high.', default='medium',
         choices=PRIORITIES, doc='worker `priorityClassName` (as in xpk)'),
    Flag('service_account', TEXT, "Kubernetes ServiceAccount of the pods; default: the namespace's own "
         "(rendered as no field, which the API server fills in as `default`).", metavar='NAME',
         check='service_account', default_text="xpk's xpk-sa with --device-type, default for TPUs; default "
         "in gcluster's spellings, as gcluster",
         doc='`serviceAccountName` of every pod (GPU: xpk-sa, which `xpk cluster create` makes; a Cluster '
         "Toolkit cluster has none, so gcluster's spellings render the namespace's `default`, as no field)"),
    Flag('queue', TEXT, 'Kueue LocalQueue (label kueue.x-k8s.io/queue-name).', default=DEFAULT_QUEUE,
         check='queue_name', doc='label `kueue.x-k8s.io/queue-name`', submit_short='-q'),
    Flag('spot', BOOL, 'Spot VMs: nodeSelector cloud.google.com/gke-spot "true" and its toleration on the '
         'TPU/GPU pods, as xpk renders it.', default=False, panel=CAPACITY,
         doc='Spot VMs: `cloud.google.com/gke-spot: "true"` node selector and toleration on the TPU/GPU pods '
         '([Capacity](#capacity-modes---spot---flex-start---reservation---on-demand))'),
    Flag('flex_start', BOOL, "Flex-start (Dynamic Workload Scheduler): nodeSelector "
         'cloud.google.com/gke-queued "true" and its toleration; the --queue\'s ClusterQueue must carry a '
         "ProvisioningRequest admission check (xpk's dws-prov), and Kueue admits the workload once the "
         'capacity is provisioned.', default=False, panel=CAPACITY,
         doc='Dynamic Workload Scheduler: `cloud.google.com/gke-queued: "true"` node selector and toleration; '
         "Kueue's ProvisioningRequest admission check on the queue's ClusterQueue asks for the capacity"),
    Flag('max_run_duration', DURATION, 'With --flex-start: how long the provisioned nodes may run (e.g. '
         '24h; bounds in seconds, 604800 = 7d), the JobSet annotation '
         'provreq.kueue.x-k8s.io/maxRunDurationSeconds.', panel=CAPACITY,
         low=1, high=MAX_RUN_DURATION_S, default_text="GKE's 7 days", doc_default="GKE's (7 days)",
         fix='a duration such as 24h, at most 7d (GKE\'s cap for flex-start nodes)',
         doc='with `--flex-start`: annotation `provreq.kueue.x-k8s.io/maxRunDurationSeconds` (whole seconds, '
         "at most 7 days), which Kueue passes to the ProvisioningRequest"),
    Flag('reservation', TEXT, 'A Compute Engine reservation (its name, or projects/P/reservations/NAME): '
         'nodeSelector cloud.google.com/reservation-name and its toleration.', panel=CAPACITY,
         metavar='NAME',
         doc='`cloud.google.com/reservation-name: NAME` node selector and toleration (a path gives its '
         'short name, as gcluster does)'),
    Flag('on_demand', BOOL, 'On-demand VMs: renders nothing (as xpk); says the workload is neither spot, '
         'flex-start nor reserved.', default=False, panel=CAPACITY,
         doc='on-demand VMs: no selector, as xpk renders it'),
    Flag('termination_grace_period_seconds', INT, 'Seconds a pod gets after SIGTERM.', default=30, low=0,
         high=MAX_INT64, fix='seconds a pod gets to exit after SIGTERM; a 64-bit integer in the pod spec',
         doc='worker pods and the head pod that runs the user container (every pod with '
         '`--no-pathways`); checked against the save time ([Timeouts and '
         'budgets](#timeouts-and-budgets-checked-before-submit))',
         aliases=(Alias('--grace-period', default='30s', kind=DURATION, note='a duration such as 30s or 2m'),)),
    Flag('ttl_seconds_after_finished', INT, 'Seconds a finished JobSet is kept.', default=43200, low=0,
         fix='seconds a finished JobSet is kept',
         doc='JobSet `ttlSecondsAfterFinished` (xpk drops it for Pathways)',
         aliases=(Alias('--gke-ttl-after-finished', default='1h', kind=DURATION,
                        note='a duration such as 5m or 1h'),)),
    Flag('env', LIST, 'Env var for the training container; repeatable; overrides --env-file.',
         metavar='KEY=VALUE', doc='env of the user container; `--env` wins over `--env-file`',
         free_text=True),
    Flag('env_file', TEXT, "File of KEY=VALUE lines ('#' comments allowed).", path=INPUT),
    Flag('proxy_server_image', TEXT, 'Pathways proxy image.', default=DEFAULT_PROXY_IMAGE, panel=PATHWAYS,
         default_text='', check='image', doc_default="xpk's Pathways proxy image",
         aliases=(Alias('--pathways-proxy-server-image'),)),
    Flag('server_image', TEXT, 'Pathways resource manager image (and worker image unless --worker-image).',
         default=DEFAULT_SERVER_IMAGE, panel=PATHWAYS, default_text='', check='image',
         doc_default="xpk's Pathways server image", aliases=(Alias('--pathways-server-image'),)),
    Flag('worker_image', TEXT, 'Pathways worker image.', panel=PATHWAYS, default_text='--server-image',
         check='image',
         doc='the worker image defaults to the server image, as in xpk (where `--worker-image` does not '
         'exist)', aliases=(Alias('--pathways-worker-image'),)),
    Flag('pathways_proxy_env', LIST, "Env var for the Pathways proxy container; repeatable (gcluster's flag).",
         panel=PATHWAYS, metavar='KEY=VALUE'),
    Flag('pathways_server_env', LIST, "Env var for the resource manager container; repeatable (gcluster's flag).",
         panel=PATHWAYS, metavar='KEY=VALUE'),
    Flag('pathways_worker_env', LIST, "Env var for the worker containers; repeatable (gcluster's flag).",
         panel=PATHWAYS, metavar='KEY=VALUE'),
    Flag('pathways_gcs_location', TEXT, 'gs:// scratch location for proxy, resource manager and workers.',
         default=DEFAULT_GCS_LOCATION, panel=PATHWAYS, default_text='', check='gcs_location',
         doc='`--gcs_scratch_location` of proxy, resource manager and workers',
         doc_default=f"`{DEFAULT_GCS_LOCATION}`"),
    Flag('custom_proxy_server_args', TEXT, 'Extra proxy args, split like a shell.', panel=PATHWAYS,
         spelling='--custom-pathways-proxy-server-args',
         doc='extra proxy args, split like a shell (`"--a=1 --b=\'x y\'"` → `--a=1`, `--b=x y`); xpk '
         'splits on single spaces', aliases=(Alias('--pathways-proxy-args', note=_SPLIT),), free_text=True),
    Flag('custom_server_args', TEXT, 'Extra resource manager args, split like a shell.', panel=PATHWAYS,
         spelling='--custom-pathways-server-args', aliases=(Alias('--pathways-server-args', note=_SPLIT),),
         free_text=True),
    Flag('custom_worker_args', TEXT, 'Extra worker args, split like a shell.', panel=PATHWAYS,
         spelling='--custom-pathways-worker-args', aliases=(Alias('--pathways-worker-args', note=_SPLIT),),
         free_text=True),
    *timing_flags.FLAGS,  # --slice-mtbf ... --from-run: declared once, for create, validate and plan
    Flag('dry_run', BOOL, 'Print only the manifest on stdout; no cluster, no credentials, no network.',
         default=False, panel=OUTPUT, option=True,
         doc='print only the manifest on stdout (messages go to stderr); no cluster, no credentials'),
    Flag('dry_run_server', BOOL, 'Send to the cluster as a server-side dry run (admission and schema '
         'checks, nothing created).', default=False, panel=OUTPUT, option=True,
         doc='submit as a server-side dry run (`dryRun=All`; also `--dry-run=server`): admission and '
         'schema checks, nothing created'),
    Flag('replace', BOOL, 'Delete a workload of the same name first.', default=False, panel=OUTPUT,
         option=True),
    Flag('check_data', BOOL, "Read each MaxText command's grain_train_files (a local or gs:// pattern; "
         'bounded reads) and confirm it is ArrayRecord holding records. A network read: off unless given.',
         default=False, option=True, commands=_BOTH),
    Flag('check_fit', BOOL, "With --trainer (or a --command that runs python3 -m trainer) on a TPU: compile the trainer's step for the slice "
         '(python -m trainer --compile-only; needs jax and libtpu here, no chip) and refuse the workload, exit 2, '
         "when it needs more than a device's HBM. Seconds to minutes of CPU: off unless given.",
         default=False, option=True, commands=("create",)),
    Flag('checkpoint_pre_start', TEXT, 'With --trainer maxtext and --checkpoint-dir: before MaxText starts, '
         'an init container from IMAGE (the trainer image, trainer/Dockerfile) moves torn checkpoint steps '
         'aside (python -m elxpk.checkpoints, i.e. checkpoint inspect --quarantine), so a restart restores '
         'the newest whole step. Off by default; see docs/maxtext.md.', panel=TRAINER, metavar='IMAGE',
         check='image', doc='an init container from IMAGE (the trainer image) that runs `elxpk checkpoint '
         'inspect --quarantine` on the MaxText checkpoint directory before MaxText restores '
         '([docs/maxtext.md](maxtext.md))'),
    Flag('output_manifest_file', TEXT, 'Also write the manifest to this file (with or without --dry-run).',
         panel=OUTPUT, option=True, path=flag_rows.OUTPUT,
         doc='also write the manifest (with or without `--dry-run`). A regular file is replaced '
         'atomically (temp file + rename); a symlink is followed (its target is replaced, the link '
         'stays); a FIFO or device (`/dev/stdout`, `>(cat)`) is written through in place, never replaced',
         aliases=(Alias('--dry-run-out', submit_short='-o', note='and nothing is submitted or printed, as '
                        "gcluster's dry run"),)),
    # Rows only gcluster's spelling has (elxpk/create/dialect.py turns them into elxpk's own values).
    Flag('compute_type', TEXT, "The machine: a TPU shorthand (v6e-16: --tpu-type), a GCE TPU machine type "
         'with --topology (ct6e-standard-4t --topology 4x4), or a GPU machine (h100-mega-80gb-8 or its GCE '
         'type: --device-type).', panel=GCLUSTER_PANEL, dialect=GCLUSTER),
    Flag('topology', TEXT, 'TPU slice topology (e.g. 2x2x1) of --compute-type.', panel=GCLUSTER_PANEL,
         dialect=GCLUSTER),
    Flag('pathways', BOOL, 'A Pathways JobSet. Without it, a command in gcluster spellings renders a plain '
         'multi-controller JobSet (elxpk --no-pathways), as gcluster does; every --pathways-* flag needs it.',
         default=False, panel=GCLUSTER_PANEL, dialect=GCLUSTER),
    Flag('gke_namespace', TEXT, "gcluster's spelling of --namespace.", panel=GCLUSTER_PANEL, option=True,
         dialect=GCLUSTER),
    Flag('await_job_completion', BOOL, 'After submitting, wait until the workload completes (as workload '
         'wait: exit 0 succeeded, 1 failed, 124 past --timeout).', default=False, panel=GCLUSTER_PANEL,
         option=True, dialect=GCLUSTER),
    Flag('timeout', TEXT, 'With --await-job-completion: give up after this long (1h, 10m; a negative '
         'duration waits forever).', default='-1s', panel=GCLUSTER_PANEL, option=True, dialect=GCLUSTER,
         metavar='DURATION'),
)

BY_NAME: dict[str, Flag] = {f.name: f for f in FLAGS}

# The longest metavar a flag's help line shows: `  --flag-name METAVAR` must fit in 80 columns with room for
# the help beside it; a longer list of choices goes into the help text, where it wraps.
_LONGEST_METAVAR = 40


def _trainer_setting(row: Setting) -> Flag:
    """The `workload create` flag of a setting the contract exposes to the launcher: the contract's row, its
    help saying the MaxText name, the env var and the trainer's default."""
    maxtext = f"MaxText {row.maxtext}; " if row.maxtext else ""
    metavar = "SECONDS" if row.unit == SECONDS and row.type == "float" else (
        None if row.type in ("int", "float") or row.choices else "TEXT")
    listed = ""
    if len("|".join(row.choices)) + 2 > _LONGEST_METAVAR:  # a help line would run past 80 columns
        metavar, listed = "TEXT", f"one of {', '.join(row.choices)}; "
    default = "none" if row.default is None else row.default
    return setting_row(row.name, default=None, commands=("create",), panel=TRAINER, metavar=metavar,
                       extra=f" ({maxtext}env {env_name(row.name)}; {listed}trainer default {default})")


# The trainer settings `workload create` takes as flags (rendered as ELXPK_<NAME>; elxpk/cli/options.py
# `with_trainer_settings`): rows of the contract table, read by its rule.
TRAINER_SETTINGS: tuple[Flag, ...] = tuple(_trainer_setting(row) for row in exposed(LAUNCHER_FLAG))


def flag(name: str) -> str:
    """The command-line spelling of the flag whose key is `name`, e.g. "--num-slices"."""
    return BY_NAME[name].flag


def default(name: str) -> Any:
    return BY_NAME[name].default


def of_command(command: str) -> tuple[Flag, ...]:
    return tuple(f for f in FLAGS if command in f.commands)


# The checks `workload create` itself runs, after parse_create: --check-data and --check-fit.
COMMAND_CHECKS = ("check_data", "check_fit")
# The keys `parse_create` takes: the table's (less COMMAND_CHECKS), the namespace (a cluster flag) and -o (the
# shared output option); the trainer settings are added by the checker. gcluster's own rows and every alias
# are read into these keys first (elxpk/create/dialect.py).
OPTION_KEYS = frozenset({f.name for f in FLAGS if f.option and f.name not in COMMAND_CHECKS and not f.dialect}
                        | {"output_format"})
SPEC_KEYS = frozenset({f.name for f in FLAGS if not f.option and not f.dialect} | {"namespace"})
ALIASES: dict[str, tuple[Flag, Alias]] = alias_pairs(FLAGS)


BEGIN = "<!-- flag-table:begin (generated from elxpk/create/flags.py) -->"
END = "<!-- flag-table:end -->"


def docs_table() -> str:
    """`workload create`'s own flags as a Markdown table: flag, default, bounds or choices, what it does."""
    return flag_rows.docs_table(FLAGS)


def embed(page: str) -> str:
    """`page` with the text between BEGIN and END replaced by the current table."""
    return flag_rows.embed(page, FLAGS, BEGIN, END)

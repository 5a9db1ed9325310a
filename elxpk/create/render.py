"""Pure rendering: `draft(spec) -> Manifest` (`render` adds the admit stage, elxpk/create/admit.py). No I/O
apart from reading the packaged templates (nothing is written: they are precompiled,
elxpk/create/template_build.py), no clock, no randomness, no cluster.
Imports yaml (and Jinja only when a precompiled template is stale); never jax, kubernetes or google.*.

The templates give the manifest its readable shape; the text is then parsed back and checked against
the spec, so that no value, however hostile, can have changed the structure.
"""

from __future__ import annotations

from typing import Any

from elxpk.admission.names import pathways_subdomain
from elxpk.create.admit import admit
from elxpk.create.failure_policy import jobset_failure_rules, pod_failure_rules
from elxpk.create.manifest import Manifest, parse_documents
from elxpk.create.spec import WorkloadSpec
from elxpk.create.template_build import template
from elxpk.errors import ElxpkError
from elxpk_contract.setting_rules import FIELDS, LAUNCHER_DERIVED, env_name

# The user command is passed to bash as "$1", never spliced into this script, so it reaches the
# container byte for byte. SIGTERM is forwarded so the trainer can save before the pod goes.
COMMAND_WRAPPER = (
    'echo "elxpk start: $(date)"; '
    '_sigterm() { kill -TERM "$PID" 2>/dev/null; }; trap _sigterm TERM; '
    'bash -c "$1" & PID=$!; '
    # A trapped signal interrupts `wait`; keep waiting, then read the command's own exit status.
    'wait "$PID"; while kill -0 "$PID" 2>/dev/null; do wait "$PID"; done; wait "$PID"; EXIT_CODE=$?; '
    'echo "elxpk end: $(date) EXIT_CODE=$EXIT_CODE"; exit "$EXIT_CODE"'
)


def command_argv(spec: WorkloadSpec) -> tuple[str, ...]:
    """The user container's `command`: the wrapper, then the user command as its only argument."""
    return ("bash", "-c", COMMAND_WRAPPER, "elxpk", spec.command or "")


# MaxText's pre-start step (--checkpoint-pre-start): the first pod only (slice 0, VM 0; the Pathways head is
# both); the checkpoint directory comes in as "$@", never spliced into the script.
PRE_START_SCRIPT = (
    'if [ "${ELXPK_JOB_INDEX:-0}" != 0 ] || [ "${JOB_COMPLETION_INDEX:-0}" != 0 ]; then '
    'echo "elxpk pre-start: slice 0, VM 0 checks the checkpoints; nothing to do here"; exit 0; fi; '
    'exec python -m elxpk.checkpoints "$@"'
)


def pre_start_argv(spec: WorkloadSpec) -> tuple[str, ...]:
    """The pre-start init container's `command` (empty when off): python -m elxpk.checkpoints DIR."""
    if not spec.checkpoint_pre_start:
        return ()
    period = spec.setting("checkpoint_period")
    return ("sh", "-c", PRE_START_SCRIPT, "elxpk-pre-start", str(spec.setting("checkpoint_dir")),
            *(("--checkpoint-period", str(period)) if "checkpoint_period" in dict(spec.settings) else ()))


# The settings the contract marks "derived": the launcher renders them from its own flags.
_DERIVED = {
    "num_slices": lambda spec: spec.num_slices,
    "slice_backend": lambda spec: spec.slice_backend,
    "elastic_enabled": lambda spec: spec.elastic,
    # The trainer's drain decides against the grace its pod really has (trainer/elastic/drain.py).
    "termination_grace_seconds": lambda spec: spec.termination_grace_period_seconds,
}


def trainer_env(spec: WorkloadSpec) -> tuple[tuple[str, str], ...]:
    """The launcher→trainer settings, as ELXPK_<NAME> env on the container that trains, in the contract
    table's order: every "derived" setting, and each "launcher" setting that was given as a flag."""

    given = dict(spec.settings)
    pairs = []
    for name, field in FIELDS.items():
        if field.expose == LAUNCHER_DERIVED:
            pairs.append((env_name(name), env_value(_DERIVED[name](spec))))
        elif name in given:
            pairs.append((env_name(name), env_value(given[name])))
    # The bundled trainer's records beside its checkpoints, so they outlive the pods (its own
    # `--command "--run-dir X"` wins over this env).
    if spec.trainer and given.get("checkpoint_dir"):
        from elxpk_storage.run_records import run_dir_beside  # lazy: only the bundled trainer's run

        beside = run_dir_beside(str(given["checkpoint_dir"]))
        if beside is not None:
            pairs.append((env_name("run_dir"), beside))
    return tuple(pairs)


def env_value(value: object) -> str:
    """A setting's value as the trainer's parser reads it back (booleans as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def container_env(spec: WorkloadSpec) -> tuple[tuple[str, str], ...]:
    """Trainer settings first, then the user's --env-file/--env (validated not to collide)."""
    return trainer_env(spec) + spec.env


def failure_rules(spec: WorkloadSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The podFailurePolicy rules of the Job that runs the user container, and the JobSet's failurePolicy
    rules; none for --headless (no user container, no exit code of ours to classify)."""

    if spec.trainer_job is None:
        return [], []
    target = spec.trainer_job if spec.pathways else None  # Pathways: only the head fails by its policy
    return (pod_failure_rules(spec.docker_name, spec.restart_on_exit_codes), jobset_failure_rules(target))


def render(spec: WorkloadSpec) -> Manifest:
    """The manifest for `spec` as `workload create` sends it: drafted, then admitted (elxpk/create/admit.py).
    For callers that want it in one call; `workload create` runs the two stages itself (elxpk/create/pipeline.py)."""
    return admit(draft(spec))


def draft(spec: WorkloadSpec) -> Manifest:
    """The render stage: the manifest for `spec`, a Pathways JobSet, a multi-controller JobSet with
    `--no-pathways`, or a GPU one with `--device-type`; checked to hold every user value where the spec
    says, not yet against the cluster's rules."""
    name, values = template_values(spec)
    env, command = values["env"], values["command"]
    text = template(name).render(**values)
    try:
        objects = parse_documents(text)
    except Exception as exc:  # a template bug, not bad input: the spec was validated
        raise ElxpkError(f"internal error: {name} rendered invalid YAML ({exc}); please report it") from exc
    _check(objects, spec, env, command)
    return Manifest(objects=objects, text=text)


def template_values(spec: WorkloadSpec) -> tuple[str, dict[str, Any]]:
    """The template that renders `spec`, and the values it is rendered with."""
    name = ("gpu_multi_controller.yaml.j2" if spec.gpu else "pathways.yaml.j2" if spec.pathways
            else "multi_controller.yaml.j2")
    subdomain = pathways_subdomain(spec.workload) if spec.pathways else None  # see elxpk/admission/names.py
    pod_rules, jobset_rules = failure_rules(spec)
    return name, dict(spec=spec, tpu=spec.tpu, env=container_env(spec), command=command_argv(spec),
                      subdomain=subdomain, pod_failure_rules=pod_rules, jobset_failure_rules=jobset_rules,
                      pre_start=pre_start_argv(spec), **_capacity_values(spec), **_gpu_values(spec))


def _capacity_values(spec: WorkloadSpec) -> dict[str, Any]:
    """What the capacity mode adds (elxpk/create/capacity.py): node selector and tolerations of the
    accelerator pods, and the JobSet's annotations."""
    capacity = spec.capacity
    if capacity is None:
        return dict(capacity_selector=(), capacity_tolerations=(), jobset_annotations=())
    return dict(capacity_selector=capacity.node_selector, capacity_tolerations=capacity.tolerations,
                jobset_annotations=capacity.jobset_annotations)


def _gpu_values(spec: WorkloadSpec) -> dict[str, Any]:
    """What the GPU template needs beyond the spec (elxpk/create/gpu.py); nothing for a TPU workload."""
    if spec.gpu is None:
        return {}
    from elxpk.create import gpu  # lazy: keeps elxpk.create.gpu off a TPU dry-run

    return gpu.template_values(spec.gpu)


def _check(objects: tuple[dict[str, Any], ...], spec: WorkloadSpec, env: tuple[tuple[str, str], ...],
           command: tuple[str, ...]) -> None:
    """Every user value sits where the spec says, unchanged; else the template (not the user) is at fault."""
    problems: list[str] = []

    def expect(what: str, got: object, want: object) -> None:
        if got != want:
            problems.append(what)

    expect("one JobSet", [(o.get("apiVersion"), o.get("kind")) for o in objects],
           [("jobset.x-k8s.io/v1alpha2", "JobSet")])
    if problems:
        raise ElxpkError("internal error: the rendered manifest is not one JobSet; please report it")
    jobset = objects[0]
    meta = jobset.get("metadata", {})
    expect("metadata", (meta.get("name"), meta.get("namespace"), meta.get("labels")),
           (spec.workload, spec.namespace,
            {"kueue.x-k8s.io/queue-name": spec.queue, "xpk.google.com/workload": spec.workload}))
    jobs = {job.get("name"): job for job in jobset.get("spec", {}).get("replicatedJobs", [])}
    env_items = [{"name": k, "value": v} for k, v in env]

    def pod(job: str) -> dict[str, Any]:
        return jobs.get(job, {}).get("template", {}).get("spec", {}).get("template", {}).get("spec", {})

    def user_container(containers: list[dict[str, Any]]) -> None:
        if len(containers) != 1:
            problems.append("one user container")
            return
        box = containers[0]
        expect("container name and image", (box.get("name"), box.get("image")), (spec.docker_name, spec.docker_image))
        expect("--command", box.get("command"), list(command))
        got_env = box.get("env", [])
        expect("--env", got_env[len(got_env) - len(env_items):], env_items)

    if spec.pathways:
        expect("replicated jobs", list(jobs), ["pathways-head", "worker"])
        head = pod("pathways-head")
        sidecars = head.get("containers" if spec.headless else "initContainers", [])
        by_name = {c.get("name"): c for c in sidecars}
        for box, args in (("pathways-proxy", spec.custom_proxy_server_args),
                          ("pathways-rm", spec.custom_server_args)):
            got = by_name.get(box, {}).get("args", [])
            expect(f"{box} args", got[len(got) - len(args):] if args else [], list(args))
        if not spec.headless:
            user_container(head.get("containers", []))
        worker = pod("worker").get("containers", [{}])[0]
        got = worker.get("args", [])
        expect("pathways-worker args", got[len(got) - len(spec.custom_worker_args):]
               if spec.custom_worker_args else [], list(spec.custom_worker_args))
        expect("--num-slices", jobs.get("worker", {}).get("replicas"), spec.num_slices)
    else:
        expect("replicated jobs", list(jobs), ["slice-job"])
        user_container(pod("slice-job").get("containers", []))
        expect("--num-slices", jobs.get("slice-job", {}).get("replicas"), spec.num_slices)
    trainer_pod = pod(spec.trainer_job or "")
    pre = [c for c in trainer_pod.get("initContainers", []) if c.get("name") == "elxpk-pre-start"]
    expect("--checkpoint-pre-start", [(c.get("image"), c.get("command")) for c in pre],
           [(spec.checkpoint_pre_start, list(pre_start_argv(spec)))] if spec.checkpoint_pre_start else [])
    if problems:
        raise ElxpkError(f"internal error: the rendered manifest does not hold {', '.join(problems)} "
                         f"as given; please report it with the flags used")

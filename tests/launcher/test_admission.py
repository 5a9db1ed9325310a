"""Admission: every render passes the JobSet webhook's and the API server's create-time rules, the name
limits are the real ones for each shape, and each rule catches what upstream refuses.

The rules are pure functions over parsed objects (elxpk/admission/); each case below breaks one rule in a
golden manifest and expects that rule's violation, while the unbroken golden has none.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk.admission import check_jobset, names
from elxpk.admission.schema import JOBSET_INDEX, crds_dir, derive_index, schema_problems, served_schema
from elxpk.catalog import lookup
from tests.launcher.cases import CASES
from tests.launcher.conftest import GOLDENS

EXAMPLE = "llama3-70b-pretrain-001"  # 23 characters: refused by JobSet >= v0.11 before the subdomain
HEAD_LABEL = "metadata.labels['jobset.sigs.k8s.io/coordinator']"


def golden(name: str = "pathways-v5p-8") -> dict:
    """A fresh copy each call (the tests change it), of a file parsed once: the hypothesis test below reads
    it for each of its 150 examples, and PyYAML's parse was two thirds of an example's time."""
    return copy.deepcopy(_parsed_golden(name))


@functools.cache
def _parsed_golden(name: str) -> dict:
    return yaml.safe_load((GOLDENS / f"{name}.yaml").read_text(encoding="utf-8"))


def render(cli, *flags: str) -> dict:
    result = cli("workload", "create", *flags, "--dry-run")
    assert result.code == 0, result.err
    return yaml.safe_load(result.out)


def pods(jobset: dict) -> list[dict]:
    return [r["template"]["spec"]["template"]["spec"] for r in jobset["spec"]["replicatedJobs"]]


def test_index_is_derived_from_the_vendored_crd(update_goldens):
    derived = derive_index(served_schema(crds_dir() / "jobset.x-k8s.io_jobsets.yaml", "v1alpha2"))
    path = crds_dir() / JOBSET_INDEX
    if update_goldens:
        path.write_text(json.dumps(derived, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    assert json.loads(path.read_text(encoding="utf-8")) == derived
    for field in ("spec.failurePolicy.maxRestarts", "spec.replicatedJobs[].replicas", "spec.ttlSecondsAfterFinished",
                  "spec.replicatedJobs[].template.spec.backoffLimit",
                  "spec.replicatedJobs[].template.spec.template.spec.containers[].ports[].containerPort"):
        assert field in derived["int"]["int32"]
    assert derived["listMaps"]["spec.replicatedJobs"]["keys"] == ["name"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_golden_is_admissible_and_schema_valid(case):
    jobset = golden(case)
    assert check_jobset(jobset) == []
    assert schema_problems(jobset) == []


def test_the_23_character_example_gets_a_subdomain_and_passes_every_rule(cli):
    jobset = render(cli, "--workload", EXAMPLE, "--tpu-type", "v5p-8", "--command", "python3 train.py")
    subdomain = jobset["spec"]["network"]["subdomain"]
    endpoint = names.coordinator_endpoint(EXAMPLE, "pathways-head", 0, 0, subdomain)
    assert len(endpoint) <= 63 and endpoint.startswith(f"{EXAMPLE}-pathways-head-0-0.")
    assert check_jobset(jobset) == [] and schema_problems(jobset) == []
    # What elxpk rendered before (the default subdomain, the JobSet name) is refused by rule 11.
    del jobset["spec"]["network"]["subdomain"]
    assert [v.path for v in check_jobset(jobset)] == ["spec.coordinator"]


def test_every_container_finds_the_head_through_the_coordinator_label(cli):
    # The head's address is never spelled out: each container reads it from the label JobSet sets to
    # <name>-pathways-head-0-0.<subdomain>, so a new subdomain moves every reader with it.
    jobset = render(cli, "--workload", EXAMPLE, "--tpu-type", "v5p-16", "--num-slices", "2", "--command", "x")
    text = yaml.safe_dump(jobset)
    assert "pathways-head-0-0" not in text and f".{EXAMPLE}" not in text
    readers = {}
    for pod in pods(jobset):
        for box in pod.get("initContainers", []) + pod["containers"]:
            env = {e["name"]: e for e in box.get("env", [])}
            for var in ("PATHWAYS_HEAD", "HOST_ADDRESS", "MEGASCALE_COORDINATOR_ADDRESS"):
                if var in env:
                    readers[(box["name"], var)] = env[var]["valueFrom"]["fieldRef"]["fieldPath"]
            for arg in box.get("args", []) + box.get("command", []):
                if "29001" in arg or "29000" in arg:
                    assert "$(PATHWAYS_HEAD)" in arg or arg.startswith("--server_port"), arg
    assert {box for box, _ in readers} == {"pathways-proxy", "pathways-rm", "jax-tpu", "pathways-worker"}
    assert set(readers.values()) == {HEAD_LABEL}


def test_short_names_keep_the_default_subdomain():
    assert names.pathways_subdomain("w" * 22) is None
    assert names.pathways_subdomain("w" * 23) is not None


@pytest.mark.parametrize("length", range(1, 40))
def test_every_admitted_pathways_name_length_gives_a_valid_coordinator_label(length):
    name = "w" * length
    subdomain = names.pathways_subdomain(name)
    endpoint = names.coordinator_endpoint(name, "pathways-head", 0, 0, subdomain)
    assert len(endpoint) <= 63
    if subdomain is not None:
        assert subdomain[0].isalpha() and subdomain.replace("-", "").isalnum() and len(subdomain) <= 63


def test_subdomains_are_deterministic_and_tell_long_names_apart():
    a, b = "llama3-70b-pretrain-001-a", "llama3-70b-pretrain-001-b"
    assert names.pathways_subdomain(a) == names.pathways_subdomain(a)
    assert names.pathways_subdomain(a) != names.pathways_subdomain(b)


# (flags, the longest admitted name): the pod <name>-<replicatedJob>-<S-1>-<V-1>-xxxxx is at most 63.
SHAPES = [
    (["--tpu-type", "v5p-8"], 39),
    (["--tpu-type", "v5p-2048", "--num-slices", "3"], 39),
    (["--tpu-type", "v5p-8", "--num-slices", "2", "--no-pathways"], 43),
    (["--tpu-type", "v5p-1024", "--num-slices", "256", "--no-pathways"], 39),
]


@pytest.mark.parametrize(("flags", "limit"), SHAPES)
def test_the_name_limit_is_the_real_one_for_each_shape(cli, flags, limit):
    jobset = render(cli, "--workload", "w" * limit, *flags, "--command", "x")
    assert check_jobset(jobset) == []
    result = cli("workload", "create", "--workload", "w" * (limit + 1), *flags, "--command", "x", "--dry-run")
    assert result.code == 2 and result.out == ""
    (line,) = [x for x in result.error_lines if "--workload" in x]
    assert f"use at most {limit} for a" in line and "(63 max)" in line


def test_the_name_limit_message_names_the_pod():
    problem = names.workload_name_problem("w" * 40, pathways=True, num_slices=1, vms_per_slice=1)
    assert problem.endswith("use at most 39 for a Pathways workload: JobSet derives pod "
                            "<name>-pathways-head-0-0-xxxxx (63 max)")
    vms = lookup("v5p-1024").vms_per_slice
    problem = names.workload_name_problem("w" * 40, pathways=False, num_slices=256, vms_per_slice=vms)
    assert f"pod <name>-slice-job-255-{vms - 1}-xxxxx" in problem


@pytest.mark.parametrize(("flags", "flag"), [
    (["--docker-name", "pathways-proxy"], "--docker-name"),
    (["--docker-name", "pathways-rm"], "--docker-name"),
    (["--max-restarts", str(2**31)], "--max-restarts"),
    (["--ttl-seconds-after-finished", str(2**31)], "--ttl-seconds-after-finished"),
    (["--num-slices", str(2**31)], "--num-slices"),
    (["--workload", "run-1\n"], "--workload"),
])
def test_flags_the_cluster_would_refuse_are_usage_errors(cli, flags, flag):
    base = {"--workload": "run-1", "--tpu-type": "v5p-8", "--command": "x"}
    for key, value in zip(flags[::2], flags[1::2], strict=True):
        base[key] = value
    result = cli("workload", "create", *[t for kv in base.items() for t in kv], "--dry-run")
    assert result.code == 2 and result.out == "", result.err
    assert any(line.startswith(f"error: {flag}") for line in result.error_lines), result.err


def test_a_worker_backoff_limit_past_int32_is_a_usage_error(cli):
    # v5p-32: 4 VMs per slice, so the elastic worker Job's backoffLimit (restarts x VMs) stops at 2**31 // 4 - 1.
    base = ["--workload", "run-1", "--tpu-type", "v5p-32", "--num-slices", "2", "--elastic-slices", "1",
            "--command", "x", "--dry-run"]
    result = cli("workload", "create", *base, "--max-slice-restarts", str(2**29))
    assert result.code == 2 and result.out == "", result.err
    assert result.error_lines == [f"error: --max-slice-restarts {2**29}: at most {2**29 - 1} with 4 VMs per slice "
                                  "(the worker Job's backoffLimit = restarts x VMs; JobSet stores it as a 32-bit "
                                  "integer)"]
    done = cli("workload", "create", *base, "--max-slice-restarts", str(2**29 - 1))
    assert done.code == 0 and f"backoffLimit: {2**31 - 4}" in done.out


def _set(path: str, value: object) -> Callable[[dict], None]:
    """A mutation: set a dotted path (list indices as numbers) in the JobSet."""
    def apply(obj: dict) -> None:
        *parents, last = path.split(".")
        node = obj
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value
    return apply


def _many(*mutations: Callable[[dict], None]) -> Callable[[dict], None]:
    def apply(obj: dict) -> None:
        for mutation in mutations:
            mutation(obj)
    return apply


RJ = "spec.replicatedJobs"
HEAD_POD = f"{RJ}.0.template.spec.template.spec"
WORKER_POD = f"{RJ}.1.template.spec.template.spec"
READY = {"name": "pathways-head", "status": "Ready"}

# (id, mutation of the pathways-v5p-8 golden, expected path, expected words in the message)
BROKEN = [
    ("1-first-depends-on", _set(f"{RJ}.0.dependsOn", [{"name": "worker", "status": "Ready"}]),
     "spec.replicatedJobs[0].dependsOn", "can't be set for the first"),
    ("1-depends-on-later", _many(_set("spec.startupPolicy", None),
                                 _set(f"{RJ}.1.dependsOn", [{"name": "later", "status": "Ready"}])),
     "spec.replicatedJobs[1].dependsOn[0]", "cannot depend on replicatedJob: later"),
    ("2-subdomain", _set("spec.network.subdomain", "Bad.sub"), "spec.network.subdomain", "RFC 1123"),
    ("3-managed-by", _set("spec.managedBy", "no-domain"), "spec.managedBy", "domain-prefixed path"),
    ("4-replicas-x-parallelism", _many(_set(f"{RJ}.1.replicas", 2**30), _set(f"{RJ}.1.template.spec.parallelism", 2)),
     "spec.replicatedJobs[1]",
     "product of replicas and parallelism"),
    ("5-group-name", _set(f"{RJ}.1.groupName", "Group_1"), "spec.replicatedJobs[1].groupName", "DNS-1035"),
    ("6-job-name", _many(_set("metadata.name", "j" * 56), _set("spec.network.subdomain", "short")),
     "spec.replicatedJobs[1].name", "job names generated"),
    ("7-pod-name", _many(_set("metadata.name", "p" * 40), _set("spec.network.subdomain", "short")),
     "spec.replicatedJobs[0].name", "pod names generated"),
    ("8-success-target", _set("spec.successPolicy.targetReplicatedJobs", ["gone"]),
     "spec.successPolicy.targetReplicatedJobs", "'gone' does not appear"),
    ("9-rule-name", _set("spec.failurePolicy.rules", [{"name": "1st", "action": "FailJobSet"}]),
     "spec.failurePolicy.rules[0].name", "must start with an alphabetic character"),
    ("9-rule-names-unique", _set("spec.failurePolicy.rules", [{"name": "r", "action": "FailJobSet"}] * 2),
     "spec.failurePolicy.rules", "rule names are not unique"),
    ("9-rule-reason", _set("spec.failurePolicy.rules", [{"action": "FailJobSet", "onJobFailureReasons": ["Oops"]}]),
     "spec.failurePolicy.rules[0].onJobFailureReasons", "not a recognized job failure reason"),
    ("9-rule-target", _set("spec.failurePolicy.rules", [{"action": "FailJobSet", "targetReplicatedJobs": ["x"]}]),
     "spec.failurePolicy.rules[0].targetReplicatedJobs", "'x' in failure policy"),
    ("9-restart-job-gate", _set("spec.failurePolicy.rules", [{"action": "RestartJob"}]),
     "spec.failurePolicy.rules", "RestartJob feature gate is disabled"),
    ("10-coordinator-job", _set("spec.coordinator.replicatedJob", "gone"), "spec.coordinator",
     "coordinator replicatedJob gone does not exist"),
    ("10-coordinator-pod", _set("spec.coordinator.podIndex", 1), "spec.coordinator", "coordinator pod index 1"),
    ("11-coordinator-label", _set("metadata.name", EXAMPLE), "spec.coordinator", "invalid label value"),
    ("12-claim-unmounted", _set("spec.volumeClaimPolicies", [{"templates": [{"metadata": {"name": "data"}}]}]),
     "spec.replicatedJobs", "don't have a matching volumeMount: data"),
    ("13-kind", _set("kind", "Jobset"), "kind", "must be 'JobSet'"),
    ("14-name", _set("metadata.name", "Golden_Workload"), "metadata.name", "RFC 1123 subdomain"),
    ("14-namespace", _set("metadata.namespace", "team.a"), "metadata.namespace", "RFC 1123 label"),
    ("14-label-key", lambda o: o["metadata"]["labels"].update({"bad key": "x"}), "metadata.labels", "name part"),
    ("14-label-value", _set("metadata.labels.team", "v" * 64), "metadata.labels", "no more than 63"),
    ("14-annotations-size", _set("metadata.annotations", {"a": "x" * (256 * 1024)}), "metadata.annotations",
     "may not be more than 262144 bytes"),
    ("15-replicated-job-names", lambda o: o["spec"]["replicatedJobs"].append(copy.deepcopy(
        o["spec"]["replicatedJobs"][1])), "spec.replicatedJobs[2]", 'Duplicate value: {"name": "worker"}'),
    ("15-env-names", lambda o: o["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]
     ["env"].append({"name": "TPU_MIN_LOG_LEVEL", "value": "1"}),
     "spec.replicatedJobs[1].template.spec.template.spec.containers[0].env[10]", "Duplicate value"),
    ("15-ports-default-protocol", lambda o: o["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
     ["containers"][0]["ports"].append({"containerPort": 8080}),
     "spec.replicatedJobs[1].template.spec.template.spec.containers[0].ports[4]", '"protocol": "TCP"'),
    ("16-in-order-and-depends-on", _set(f"{RJ}.1.dependsOn", [READY]), "spec", "mutually exclusive"),
    ("17-int32", _set("spec.failurePolicy.maxRestarts", 2**31), "spec.failurePolicy.maxRestarts", "int32"),
    ("17-int32-port", _set(f"{WORKER_POD}.containers.0.ports.0.containerPort", 2**31),
     "spec.replicatedJobs[1].template.spec.template.spec.containers[0].ports[0].containerPort", "int32"),
    ("container-names", _set(f"{HEAD_POD}.containers.0.name", "pathways-proxy"),
     "spec.replicatedJobs[0].template.spec.template.spec.containers[0].name", "Duplicate value: 'pathways-proxy'"),
    ("job-pod-failure-policy-on-failure",
     _set(f"{RJ}.1.template.spec.podFailurePolicy", {"rules": [{"action": "FailJob", "onExitCodes": {
         "operator": "In", "values": [42]}}]}),
     "spec.replicatedJobs[1].template.spec.template.spec.restartPolicy", 'only "Never" is supported'),
    ("job-restart-always", _set(f"{WORKER_POD}.restartPolicy", "Always"),
     "spec.replicatedJobs[1].template.spec.template.spec.restartPolicy", "Required value"),
    ("job-indexed-needs-completions", _set(f"{RJ}.1.template.spec.completions", None),
     "spec.replicatedJobs[1].template.spec.completions", "when completion mode is Indexed"),
    ("job-backoff-limit", _set(f"{RJ}.1.template.spec.backoffLimit", -1),
     "spec.replicatedJobs[1].template.spec.backoffLimit", "greater than or equal to 0"),
    ("job-indexed-parallelism", _many(_set(f"{RJ}.1.template.spec.parallelism", 100_001),
                                      _set(f"{RJ}.1.template.spec.completions", 100_001)),
     "spec.replicatedJobs[1].template.spec.parallelism", "less than or equal to 100000"),
    ("job-per-index-needs-indexed", _many(_set(f"{RJ}.1.template.spec.completionMode", "NonIndexed"),
                                          _set(f"{RJ}.1.template.spec.backoffLimitPerIndex", 1)),
     "spec.replicatedJobs[1].template.spec.backoffLimitPerIndex", "requires indexed completion mode"),
    ("pod-mount-without-volume", _set(f"{WORKER_POD}.volumes", []),
     "spec.replicatedJobs[1].template.spec.template.spec.containers[0].volumeMounts[0].name", "Not found"),
    # Found by tests/realcluster (the real API server refuses them, JobSet's webhook does not).
    ("pod-image-required", _set(f"{WORKER_POD}.containers.0.image", ""),
     "spec.replicatedJobs[1].template.spec.template.spec.containers[0].image", "Required value"),
    ("pod-init-image-required", lambda o: o["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
     ["initContainers"][0].pop("image"),
     "spec.replicatedJobs[0].template.spec.template.spec.initContainers[0].image", "Required value"),
    ("pod-image-whitespace", _set(f"{WORKER_POD}.containers.0.image", " server:latest"),
     "spec.replicatedJobs[1].template.spec.template.spec.containers[0].image", "leading or trailing whitespace"),
    ("pod-env-name-equals", _set(f"{WORKER_POD}.containers.0.env.0.name", "A=B"),
     "spec.replicatedJobs[1].template.spec.template.spec.containers[0].env[0].name", "other than '='"),
    ("pod-env-name-not-ascii", _set(f"{WORKER_POD}.containers.0.env.0.name", "CAFÉ"),
     "spec.replicatedJobs[1].template.spec.template.spec.containers[0].env[0].name", "printable ASCII"),
    ("pod-env-name-empty", _set(f"{WORKER_POD}.containers.0.env.0.name", ""),
     "spec.replicatedJobs[1].template.spec.template.spec.containers[0].env[0].name", "Required value"),
    ("pod-env-from-prefix", _set(f"{WORKER_POD}.containers.0.envFrom", [{"prefix": "A\tB", "configMapRef": {
        "name": "c"}}]),
     "spec.replicatedJobs[1].template.spec.template.spec.containers[0].envFrom[0].prefix", "printable ASCII"),
]


@pytest.mark.parametrize("name", ["1ST", "my.var", "a b", "x-y", "~"])
def test_env_names_kubernetes_1_34_admits_pass(name):
    """RelaxedEnvironmentVariableValidation is GA (locked on) since Kubernetes 1.34: any printable ASCII but '='."""
    jobset = golden()
    _set(f"{WORKER_POD}.containers.0.env.0.name", name)(jobset)
    assert check_jobset(jobset) == []


@pytest.mark.parametrize(("mutate", "path", "words"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_each_rule_catches_what_upstream_refuses(mutate, path, words):
    jobset = golden()
    mutate(jobset)
    found = check_jobset(jobset)
    assert any(v.path == path and words in v.message for v in found), "\n".join(map(str, found))


def test_the_schema_check_is_strict_and_enforces_int32():
    jobset = golden()
    jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "x"
    jobset["spec"]["replicatedJobs"][1]["replicas"] = 2**31
    found = {str(v) for v in schema_problems(jobset)}
    assert ("spec.replicatedJobs[1].template.spec.template.spec.containers[0]: unknown field: "
            "'imagePullPolicyy' was unexpected") in found
    assert any(v.startswith("spec.replicatedJobs[1].replicas: 2147483648 does not fit in int32") for v in found)


def _paths(node: object, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value in a parsed manifest."""
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


GOLDEN_PATHS = _paths(golden())[1:]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.sampled_from(GOLDEN_PATHS),
       value=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                      max_size=3), max_leaves=6))
def test_any_damaged_manifest_gets_violations_not_a_crash(where, value):
    # `workload validate` reads whatever a user hands it: every rule must survive every shape of value.
    from elxpk.admission.files import document_problems

    jobset = golden()
    node = jobset
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = value
    found, note = document_problems(jobset)
    assert note is None and all(v.path and v.message for v in found)


def test_the_render_path_loads_no_schema_validator():
    # `workload create --dry-run` runs the admission rules on every render, but jsonschema and
    # kubernetes-validate (for `workload validate`) stay out of its start-up.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from elxpk.cli.main import main\n"
        f"rc = main(['workload', 'create', '--workload', {EXAMPLE!r}, '--tpu-type', 'v5p-8', '--command', 'x',"
        " '--dry-run'])\n"
        "loaded = sorted(m for m in ('jsonschema', 'kubernetes_validate', 'elxpk.admission.schema')"
        " if m in sys.modules)\n"
        "print(rc, 'elxpk.admission.webhook' in sys.modules, loaded, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stderr.strip().splitlines()[-1] == "0 True ['elxpk.admission.schema']"

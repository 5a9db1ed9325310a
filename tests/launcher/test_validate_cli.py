"""`elxpk workload validate FILE...` through the real CLI entry point: the goldens pass, and xpk-style
manifests with each known bad case are caught, one `FILE: PATH: message` line per violation."""

from __future__ import annotations

import io
import sys

import pytest
import yaml

from tests.launcher.cases import CASES
from tests.launcher.conftest import GOLDENS

XPK_NAME_LIMIT = "x" * 40  # xpk's own --workload limit; JobSet refuses it for Pathways


def xpk_pathways() -> dict:
    """The manifest `xpk workload create-pathways` renders (elxpk's pathways golden has the same shape)."""
    return yaml.safe_load((GOLDENS / "pathways-v5p-8.yaml").read_text(encoding="utf-8"))


def worker_pod(jobset: dict) -> dict:
    return jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]


def head_pod(jobset: dict) -> dict:
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def long_name(jobset: dict) -> None:
    jobset["metadata"]["name"] = XPK_NAME_LIMIT


def proxy_named_container(jobset: dict) -> None:  # xpk --docker-name pathways-proxy
    head_pod(jobset)["containers"][0]["name"] = "pathways-proxy"


def failure_policy_on_restarting_worker(jobset: dict) -> None:  # ml-auto-solutions#1369
    jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["podFailurePolicy"] = {
        "rules": [{"action": "FailJob", "onExitCodes": {"containerName": "pathways-worker", "operator": "In",
                                                        "values": [42]}}]}


def int32_overflow(jobset: dict) -> None:
    jobset["spec"]["failurePolicy"]["maxRestarts"] = 2**31


def unknown_field(jobset: dict) -> None:
    worker_pod(jobset)["containers"][0]["imagePullPolicyy"] = "Always"


def duplicate_replicated_job(jobset: dict) -> None:
    jobset["spec"]["replicatedJobs"].append(jobset["spec"]["replicatedJobs"][1])


def core_pod_type(jobset: dict) -> None:
    worker_pod(jobset)["terminationGracePeriodSeconds"] = "thirty"


BAD = [
    (long_name, ["spec.coordinator: spec will lead to invalid label value",
                 "spec.replicatedJobs[0].name: Invalid value:"]),
    (proxy_named_container, ["spec.replicatedJobs[0].template.spec.template.spec.containers[0].name: Duplicate value"]),
    (failure_policy_on_restarting_worker, ["spec.replicatedJobs[1].template.spec.template.spec.restartPolicy: "
                                           "Invalid value: 'OnFailure': only \"Never\""]),
    (int32_overflow, ["spec.failurePolicy.maxRestarts: 2147483648 does not fit in int32"]),
    (unknown_field, ["spec.replicatedJobs[1].template.spec.template.spec.containers[0]: unknown field: "
                     "'imagePullPolicyy'"]),
    (duplicate_replicated_job, ['spec.replicatedJobs[2]: Duplicate value: {"name": "worker"}']),
    (core_pod_type, ["spec.replicatedJobs[1].template.spec.template.spec.terminationGracePeriodSeconds: "
                     "'thirty' is not of type 'integer'"]),
]


def test_every_golden_passes(cli):
    files = [str(GOLDENS / f"{name}.yaml") for name in sorted(CASES)]
    result = cli("workload", "validate", *files)
    assert result.code == 0, result.out + result.err
    assert result.out.strip() == f"OK: {len(files)} document(s) in {len(files)} file(s) pass the JobSet schema, " \
                                 f"admission and Job rules"


@pytest.mark.parametrize(("breaks", "expected"), BAD, ids=[b[0].__name__ for b in BAD])
def test_xpk_style_manifest_with_a_bad_case_is_caught(cli, tmp_path, breaks, expected):
    jobset = xpk_pathways()
    breaks(jobset)
    path = tmp_path / "jobset.yaml"
    path.write_text(yaml.safe_dump(jobset), encoding="utf-8")
    result = cli("workload", "validate", str(path))
    assert result.code == 1, result.out + result.err
    lines = result.out.splitlines()
    assert all(line.startswith(f"{path}: ") for line in lines), lines
    for words in expected:
        assert any(line.startswith(f"{path}: {words}") for line in lines), "\n".join(lines)
    assert result.error_lines == [f"error: {len(lines)} violation(s) in 1 document(s); the cluster would refuse them"]


def test_stdin_and_several_documents(cli, monkeypatch):
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "head"},
               "spec": {"ports": [{"port": "http"}]}}
    other = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    text = yaml.safe_dump_all([xpk_pathways(), service, other])
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    result = cli("workload", "validate", "-")
    assert result.code == 1
    assert result.out.splitlines() == ["- (document 2): spec.ports[0].port: 'http' is not of type 'integer'"]
    assert ("note: - (document 3): apiVersion 'example.com/v1', kind 'Widget': no schema known to elxpk, skipped"
            in result.err)


@pytest.mark.parametrize(("content", "words"), [
    (None, "cannot read it (No such file or directory)"),
    ("kind: [unclosed\n", "not valid YAML at line 2"),
    (b"\xff\xfe bad bytes", "cannot read it"),
])
def test_unreadable_or_bad_yaml_is_one_line_and_exit_2(cli, tmp_path, content, words):
    path = tmp_path / "m.yaml"
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    elif isinstance(content, bytes):
        path.write_bytes(content)
    good = GOLDENS / "pathways-v5p-8.yaml"
    result = cli("workload", "validate", str(good), str(path))
    assert result.code == 2 and result.out == ""
    assert result.error_lines == [line for line in result.err.splitlines() if line]
    assert len(result.error_lines) == 1 and words in result.error_lines[0]


def test_a_pathways_job_is_checked_against_its_vendored_crd(cli, tmp_path):
    job = {"apiVersion": "pathways-job.pathways.domain/v1", "kind": "PathwaysJob",
           "metadata": {"name": "pw-1"},
           "spec": {"maxRestarts": 2, "controller": {"deploymentMode": "default"},
                    "workers": [{"type": "ct5p-hightpu-4t", "topology": "2x2x1", "numSlices": 2}]}}
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(job), encoding="utf-8")
    assert cli("workload", "validate", str(good)).code == 0
    job["spec"]["maxRestarts"] = 2**31
    job["spec"]["controller"]["deploymentMode"] = "colocate"
    job["metadata"]["name"] = "PW_1"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(job), encoding="utf-8")
    result = cli("workload", "validate", str(bad))
    assert result.code == 1
    lines = result.out.splitlines()
    assert f"{bad}: spec.maxRestarts: 2147483648 does not fit in int32 (format: int32): must be from " \
           f"-2147483648 to 2147483647" in lines
    assert f'{bad}: spec.controller.deploymentMode: Unsupported value: \'colocate\': supported values: ' \
           f'"colocate_head_with_workers", "default"' in lines
    assert any(line.startswith(f"{bad}: metadata.name: Invalid value: 'PW_1'") for line in lines), lines


def test_a_yaml_alias_bomb_is_refused_not_expanded(cli, tmp_path):
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(levels) + "\n", encoding="utf-8")
    result = cli("workload", "validate", str(path))
    assert result.code == 2 and result.out == ""
    assert result.error_lines == [f"error: {path}: more than 1000000 values once YAML aliases are expanded; a "
                                  f"manifest is far smaller, so check what produced it"]

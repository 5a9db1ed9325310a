"""tools/testcluster names its versions once: the build modules' go.mod files must say the same (no Go needed)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "testcluster"


def tool():  # noqa: ANN201
    spec = importlib.util.spec_from_file_location("testcluster_main", TOOL / "__main__.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def required(go_mod: Path) -> dict[str, str]:
    return dict(re.findall(r"^\s*(?:require\s+)?(\S+) (v\S+)(?: // indirect)?$", go_mod.read_text(), re.M))


def test_go_mod_files_pin_the_versions_the_tool_names() -> None:
    names = tool()
    kube = required(TOOL / "kube" / "go.mod")
    assert kube["k8s.io/kubernetes"] == names.KUBERNETES
    assert kube["go.etcd.io/etcd/server/v3"] == names.ETCD
    assert required(TOOL / "jobset" / "go.mod")["sigs.k8s.io/jobset"] == names.JOBSET
    staging = "v0." + names.KUBERNETES.split(".", 1)[1]  # v1.34.4 -> v0.34.4
    replaces = re.findall(r"^\s*(k8s\.io/\S+) => (\S+) (v\S+)$", (TOOL / "kube" / "go.mod").read_text(), re.M)
    assert len(replaces) > 20
    assert all(module == target and version == staging for module, target, version in replaces), replaces


def test_cache_key_names_every_version() -> None:
    names = tool()
    key = names.bin_dir().name
    for version in (names.KUBERNETES, names.ETCD, names.JOBSET, names.KUEUE, names.KWOK, names.FAKE_GCS):
        assert version in key

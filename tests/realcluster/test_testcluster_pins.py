"""tools/testcluster names its versions once: the build modules' go.mod files must say the same (no Go needed)."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
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
    assert required(TOOL / "vk" / "go.mod")["github.com/virtual-kubelet/virtual-kubelet"] == names.VIRTUAL_KUBELET


def test_cache_key_names_every_version() -> None:
    names = tool()
    key = names.bin_dir().name
    for version in (names.KUBERNETES, names.ETCD, names.JOBSET, names.KUEUE, names.KWOK, names.FAKE_GCS,
                    names.VIRTUAL_KUBELET):
        assert version in key


def test_the_provider_binary_changes_with_its_sources_only(tmp_path: Path) -> None:
    """testcluster-vk is this repository's code: its binary's name hashes vk/'s sources (not its tests), so
    `build` rebuilds it after an edit and a warm cache does nothing."""
    names = tool()
    assert names.VK_BINARY.startswith("testcluster-vk-") and names.VK_BINARY in names.BUILDS
    assert names._vk_binary() == names.VK_BINARY
    assert names.BUILDS[names.VK_BINARY] == ("vk", ".")


def test_bad_pools_end_up_before_anything_starts(tmp_path: Path) -> None:
    """`up --pools/--process-pools` with an unknown type or a count that is no number: one line naming the
    flag, before a process starts or the run dir is made."""
    import sys  # noqa: PLC0415

    sys.path.insert(0, str(TOOL))
    try:
        from cluster_up import start  # noqa: PLC0415
    finally:
        sys.path.remove(str(TOOL))
    run_dir = tmp_path / "run"
    for pools, process_pools, message in (
            ("v5p-8:1", "v9-8:2", "--process-pools: unknown TPU or GPU type 'v9-8'"),
            ("v5p-8:1", "v4-8:two", "--process-pools: 'v4-8:two': the count after ':' must be a number"),
            ("v5p-8:1", "h100-80gb-8:2x", "--process-pools: 'h100-80gb-8:2x': the count after ':' must be a number"),
            ("nope:1", "", "--pools: unknown TPU or GPU type 'nope'")):
        try:
            start(run_dir, tmp_path / "bins", TOOL, pools=pools, process_pools=process_pools, vk_binary="x")
        except SystemExit as exc:
            assert str(exc).startswith(f"testcluster: {message}"), exc
        else:
            raise AssertionError("accepted")
        assert not run_dir.exists()


def test_built_says_its_answer_either_way(tmp_path: Path) -> None:
    """`tools/testcluster built`: one line and exit 1 when not built (it used to exit 1 without a word); the
    subcommands each say what they do in --help."""
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    env = {**os.environ, "ELXPK_TESTCLUSTER_CACHE": str(tmp_path / "empty-cache")}
    built = subprocess.run([sys.executable, str(TOOL), "built"], capture_output=True, text=True, env=env, timeout=60)
    assert built.returncode == 1 and built.stdout == ""
    assert built.stderr.startswith("testcluster: not built (expected in ") and "tools/testcluster build" in built.stderr
    assert len(built.stderr.splitlines()) == 1
    usage = subprocess.run([sys.executable, str(TOOL), "--help"], capture_output=True, text=True, timeout=60)
    for name in ("build", "up", "down", "built"):
        assert re.search(rf"^\s+{name}\s+\S", usage.stdout, re.M), (name, usage.stdout)


def test_a_go_step_that_fails_twice_is_run_a_third_time_and_one_that_always_fails_is_reported(
        tmp_path: Path, capfd) -> None:  # noqa: ANN001
    """The build's go steps are retried (the module proxy timed out once in a cold CI build): a real process
    that fails its first two runs succeeds on the third; one that always fails gives up after GO_ATTEMPTS."""
    names = tool()
    runs = tmp_path / "runs"
    script = tmp_path / "flaky.py"  # one more x per run; exits 0 from the third run on
    script.write_text(f"import pathlib, sys\np = pathlib.Path({str(runs)!r})\np.write_text((p.read_text() if "
                      f"p.exists() else '') + 'x')\nsys.exit(0 if len(p.read_text()) >= 3 else 1)\n")
    flaky = [sys.executable, str(script)]
    waits: list[float] = []
    assert names._go_with_retries("go build flaky", flaky, tmp_path, dict(os.environ), sleep=waits.append)
    assert runs.read_text() == "xxx" and waits == [5, 10]
    assert "go build flaky failed (attempt 1 of 3); again in 5 s" in capfd.readouterr().err

    waits.clear()
    assert not names._go_with_retries("go install broken", [sys.executable, "-c", "raise SystemExit(1)"], tmp_path,
                                      dict(os.environ), sleep=waits.append)
    assert waits == [5, 10]
    assert "go install broken failed (attempt 2 of 3)" in capfd.readouterr().err

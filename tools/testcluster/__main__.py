"""A local Kubernetes control plane built from upstream Go modules, for elxpk's real-cluster tests.

    python tools/testcluster build        # go build/install every component into ~/.cache/elxpk/testcluster/
    python tools/testcluster up [--dir D] # start it on 127.0.0.1; prints KUBECONFIG=... and STORAGE_EMULATOR_HOST=...
    python tools/testcluster down [--dir D]

Components: etcd, kube-apiserver, kube-controller-manager and kube-scheduler (k8s.io/kubernetes, built
from the module in kube/), the JobSet controller and webhooks, Kueue, kwok (simulated nodes and pod
lifecycles, see stages.yaml), virtual-kubelet (vk/: nodes whose pods run as processes here) and
fake-gcs-server. Every listener is on 127.0.0.1. The nodes look like a
cluster made by `xpk cluster create-pathways`: one TPU node pool per slice, and the cpu-np pool.
Nothing upstream is kept in the repository: sources come from the Go module proxy through `go`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = Path(os.environ.get("ELXPK_TESTCLUSTER_CACHE", Path.home() / ".cache" / "elxpk" / "testcluster"))
DEFAULT_RUN_DIR = CACHE / "run"

KUBERNETES = "v1.34.4"  # kube/go.mod pins k8s.io/kubernetes and its staging modules (v0.34.4) and etcd
ETCD = "v3.6.4"  # the etcd server version k8s.io/kubernetes v1.34.4 requires
# JobSet: elxpk/crds/ holds the CRD of commit 08dfbdf (main after v0.12.0); the Go module proxy serves no
# version of that commit, so the newest release it serves is built. Between the two the webhook differs only
# for generateName (elxpk always sets a name) and the CRD by `minimum: 0` on replicas; the vendored CRD is
# the one installed.
JOBSET = "v0.12.0"
KUEUE = "v0.17.0"  # xpk installs v0.17.1, which the proxy does not serve
KWOK = "v0.8.0"
FAKE_GCS = "v1.56.1"
# virtual-kubelet: the process-pool nodes (vk/, its own module: v1.14.1 requires client-go v0.37.1 and Go 1.26)
VIRTUAL_KUBELET = "v1.14.1"

# binary -> (build module under tools/testcluster/, package): `go build` there, with the go.sum kept here.
BUILDS = {"kube-apiserver": ("kube", "k8s.io/kubernetes/cmd/kube-apiserver"), "etcd": ("kube", "./etcd"),
          "kube-controller-manager": ("kube", "k8s.io/kubernetes/cmd/kube-controller-manager"),
          "kube-scheduler": ("kube", "k8s.io/kubernetes/cmd/kube-scheduler"),
          "jobset": ("jobset", "sigs.k8s.io/jobset")}


def _vk_binary() -> str:
    """The provider is this repository's code: its binary is named by a hash of its sources, so an edit
    rebuilds it (and only it)."""
    import hashlib  # noqa: PLC0415 - only here

    digest = hashlib.sha256()
    for path in sorted((HERE / "vk").glob("*")):
        if path.suffix in (".go", ".mod", ".sum") and not path.name.endswith("_test.go"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"testcluster-vk-{digest.hexdigest()[:12]}"


VK_BINARY = _vk_binary()
BUILDS[VK_BINARY] = ("vk", ".")
# name -> (module@version to `go install`, binary name)
INSTALLS = {
    "kueue": (f"sigs.k8s.io/kueue/cmd/kueue@{KUEUE}", "kueue"),
    "kwok": (f"sigs.k8s.io/kwok/cmd/kwok@{KWOK}", "kwok"),
    "fake-gcs-server": (f"github.com/fsouza/fake-gcs-server@{FAKE_GCS}", "fake-gcs-server"),
}
# Upstream manifests `build` copies next to the binaries: module path inside the module cache -> file name.
MANIFESTS = {
    ("sigs.k8s.io/jobset", JOBSET): {"config/components/webhook/manifests.yaml": "jobset-webhooks.yaml"},
    ("sigs.k8s.io/kueue", KUEUE): {"config/components/webhook/manifests.yaml": "kueue-webhooks.yaml",
                                   "config/components/crd": "kueue-crd"},
    ("sigs.k8s.io/kwok", KWOK): {"kustomize/stage/node/fast/node-initialize.yaml": "kwok-node-initialize.yaml",
                                 "kustomize/stage/pod/fast/pod-ready.yaml": "kwok-pod-ready.yaml"},
}


GO_ATTEMPTS = 3  # each go build, install or module download (the module proxy can time out once)


def bin_dir() -> Path:
    key = (f"k8s-{KUBERNETES}_etcd-{ETCD}_jobset-{JOBSET}_kueue-{KUEUE}_kwok-{KWOK}_fakegcs-{FAKE_GCS}"
           f"_vk-{VIRTUAL_KUBELET}")
    return CACHE / key


def go() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if not found:
        sys.exit("testcluster: Go is not installed (https://go.dev/doc/install); the control plane is built with it")
    return found


def expected_files() -> list[Path]:
    out = bin_dir()
    files = [out / name for name in BUILDS] + [out / binary for _, binary in INSTALLS.values()]
    return files + [out / name for table in MANIFESTS.values() for name in table.values()]


def is_built() -> bool:
    return all(path.exists() for path in expected_files())


def build(_: argparse.Namespace) -> None:
    """`go build`/`go install` whatever is missing (a warm cache does nothing); exit 1 naming what failed."""
    out = bin_dir()
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOBIN": str(out), "GOFLAGS": os.environ.get("GOFLAGS", "-p=2") + " -buildvcs=false"}
    nice = ["nice", "-n", "10"] if shutil.which("nice") else []
    failed = []
    start = time.monotonic()
    major, minor = KUBERNETES[1:].split(".")[:2]
    # What Kubernetes' own build stamps (hack/lib/version.sh): /version and the user agents read it.
    stamp = " ".join(f"-X {pkg}.{var}={value}" for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
                     for var, value in (("gitVersion", KUBERNETES), ("gitMajor", major), ("gitMinor", minor),
                                        ("gitTreeState", "clean")))
    for name, (module, package) in BUILDS.items():
        if not (out / name).exists():
            what = f"go build {package}"
            _step(what)
            flags = f"-ldflags=-s -w {stamp}" if module == "kube" else "-ldflags=-s -w"
            cmd = [*nice, go(), "build", "-trimpath", flags, "-o", str(out / name), package]
            if not _go_with_retries(what, cmd, HERE / module, env):
                failed.append(name)
    for name, (module, binary) in INSTALLS.items():
        if not (out / binary).exists():
            what = f"go install {module}"
            _step(what)
            cmd = [*nice, go(), "install", "-trimpath", "-ldflags=-s -w", module]
            if not _go_with_retries(what, cmd, out, env):
                failed.append(name)
    for (module, version), table in MANIFESTS.items():
        if all((out / name).exists() for name in table.values()):
            continue
        found = _go_run(f"go mod download {module}@{version}", [go(), "mod", "download", "-json",
                                                                    f"{module}@{version}"], out, env, capture=True)
        source = Path(json.loads(found.stdout)["Dir"]) if found.returncode == 0 else None
        for inside, name in table.items():
            if source is None or not (source / inside).exists():
                failed.append(f"{module}@{version}/{inside}")
                continue
            target = out / name
            if (source / inside).is_dir():
                shutil.copytree(source / inside, target, dirs_exist_ok=True)
            else:
                shutil.copyfile(source / inside, target)
    if failed:
        sys.exit(f"testcluster: build failed for {', '.join(failed)} (see the go output above)")
    for stale in out.glob("testcluster-vk-*"):  # the provider as it was before an edit
        if stale.name != VK_BINARY:
            stale.unlink()
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"testcluster: built in {out} ({size / 2**20:.0f} MiB, {time.monotonic() - start:.0f} s)")


def _go_with_retries(what: str, cmd: list[str], cwd: Path, env: dict[str, str],
                     sleep: Callable[[float], None] = time.sleep) -> bool:
    """Run one `go build`/`go install`, again up to GO_ATTEMPTS in all (_go_run); True once it succeeded."""
    return _go_run(what, cmd, cwd, env, sleep=sleep).returncode == 0


def _go_run(what: str, cmd: list[str], cwd: Path, env: dict[str, str], *, capture: bool = False,
            sleep: Callable[[float], None] = time.sleep) -> subprocess.CompletedProcess[str]:
    """One go command, again up to GO_ATTEMPTS in all, 5 s then 10 s apart: go does not retry a module
    download, and one TLS handshake timeout from the module proxy failed a cold CI build. A compile error
    fails fast each time (what was built stays in go's build cache), so the retries cost little when they
    cannot help. `capture`: its output is returned, not shown."""
    def once() -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=capture, text=True)

    for attempt in range(1, GO_ATTEMPTS):
        done = once()
        if done.returncode == 0:
            return done
        _step(f"{what} failed (attempt {attempt} of {GO_ATTEMPTS}); again in {5 * attempt} s")
        sleep(5 * attempt)
    return once()


def _step(message: str) -> None:
    print(f"testcluster: {message}", file=sys.stderr, flush=True)


def report_built(_: argparse.Namespace) -> None:
    """`built`: one line either way, so a person sees the answer and a script reads the exit code."""
    if is_built():
        print(f"testcluster: built in {bin_dir()}")
        return
    sys.exit(f"testcluster: not built (expected in {bin_dir()}): run `python tools/testcluster build`")


def up(args: argparse.Namespace) -> None:
    if not is_built():
        sys.exit("testcluster: the control plane is not built: run `python tools/testcluster build` first")
    try:
        from cluster_up import start  # noqa: PLC0415 - the heavy part, only for `up`
    except ImportError as err:
        sys.exit(f"testcluster: `up` needs the dev dependencies ({err.name} is missing): run it with the "
                 "project's venv, .venv/bin/python tools/testcluster up")

    run_dir = Path(args.dir)
    if (run_dir / "pids.json").exists():
        down(args)
    start(run_dir, bin_dir(), HERE, pools=args.pools, process_pools=args.process_pools, vk_binary=VK_BINARY)
    print((run_dir / "env").read_text(), end="")


def down(args: argparse.Namespace) -> None:
    """Stop the processes `up` started (by the pids it recorded, newest first), then whatever outlived them in
    their sessions, and remove the run dir: it returns once every one of them has ended."""
    run_dir = Path(args.dir)
    pids_file = run_dir / "pids.json"
    pids = json.loads(pids_file.read_text()) if pids_file.exists() else {}
    ours = [pid for name, pid in reversed(list(pids.items())) if stop_process(pid, run_dir, name)]
    end_sessions(set(ours))
    if run_dir.exists():
        shutil.rmtree(run_dir, ignore_errors=True)


def cpu(args: argparse.Namespace) -> None:
    """The CPU seconds each process `up` started has used so far, its reaped children's included (the
    process pools' pods are a virtual-kubelet's children): what a control plane costs its machine."""
    run_dir = Path(args.dir)
    pids_file = run_dir / "pids.json"
    pids = json.loads(pids_file.read_text()) if pids_file.exists() else {}
    ticks = os.sysconf("SC_CLK_TCK")
    rows = []
    for name, pid in pids.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone: its time is not known
            continue
        own, children = (int(fields[11]) + int(fields[12])) / ticks, (int(fields[13]) + int(fields[14])) / ticks
        rows.append((own + children, name, own, children))
    total = sum(r[0] for r in rows)
    print(f"testcluster {run_dir.name}: {total:.0f} CPU s in all")
    for spent, name, own, children in sorted(rows, reverse=True):
        print(f"  {spent:8.1f} s  {name} ({own:.1f} own + {children:.1f} children)")


def stop_process(pid: int, run_dir: Path, name: str) -> bool:
    """SIGTERM, then SIGKILL after 10 s, until it has ended; False when the pid is not (or no longer) ours."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    if str(run_dir).encode() not in cmdline:  # the pid was reused by something that is not ours
        return False
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if not Path(f"/proc/{pid}").exists() or _is_zombie(pid):
                return True
            time.sleep(0.1)
        _step(f"{name} (pid {pid}) did not stop on {sig.name}")
    return True


def end_sessions(sessions: set[int], timeout_s: float = 10) -> None:
    """SIGKILL every process left in these sessions (each binary `up` starts leads its own; the process pools'
    pods are virtual-kubelet's children, whose own exit stops them, but its SIGKILL only has the kernel send
    theirs), and return once none is left."""
    deadline = time.monotonic() + timeout_s
    while left := session_members(sessions):
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            _step(f"processes {left} of the cluster's sessions did not end on SIGKILL")
            return
        time.sleep(0.1)


def session_members(sessions: set[int]) -> list[int]:
    """The live processes (zombies are done) whose session is one of `sessions`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if fields[0] != "Z" and int(fields[3]) in sessions:
            found.append(int(entry.name))
    return found


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def main() -> None:
    parser = argparse.ArgumentParser(prog="testcluster", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build every component (reuses the cache)").set_defaults(func=build)
    helps = {"up": "start the control plane on 127.0.0.1 (free ports) and print its KUBECONFIG= and "
                   "STORAGE_EMULATOR_HOST= lines",
             "down": "stop what `up` started in --dir and remove that directory"}
    helps["cpu"] = "print the CPU seconds each process of the cluster in --dir has used (its children's included)"
    for name, func in (("up", up), ("down", down), ("cpu", cpu)):
        cmd = sub.add_parser(name, help=helps[name])
        cmd.add_argument("--dir", default=str(DEFAULT_RUN_DIR), help="run directory (certs, data, logs)")
        cmd.set_defaults(func=func)
        if name == "up":
            cmd.add_argument("--pools", default="v5p-8:2,v5litepod-16:3,v6e-16:2,v5p-16:2,tpu7x-8:2",
                             help="TPU node pools as TYPE:SLICES,... (one pool per slice, as xpk makes them), "
                                  "GPU node pools as TYPE:NODES (one pool, e.g. h100-80gb-8:2)")
            cmd.add_argument("--process-pools", default="v4-8:2,h100-80gb-8:2",
                             help="TPU and GPU node pools whose pods really run, as processes on this machine "
                                  "(virtual-kubelet, vk/), spelled as --pools; '' for none")
    sub.add_parser("built", help="say whether every component is built: exit 0 if so, 1 if not").set_defaults(
        func=report_built)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()

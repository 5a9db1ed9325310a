"""Regenerate the vendored gcluster renders in this folder (run by hand, never by the tests).

gcluster is the CLI of github.com/GoogleCloudPlatform/cluster-toolkit (Go module `hpc-toolkit`, so it is built
from the repository, not `go install`ed). Outside the checkout:

    git -C <clone of cluster-toolkit> archive v1.95.0 | tar -x -C ~/.cache/elxpk/gcluster-src-v1.95.0
    cd ~/.cache/elxpk/gcluster-src-v1.95.0 && nice -n 10 go build -o ~/.cache/elxpk/gcluster-v1.95.0/gcluster \
        -ldflags "-X 'main.gitTagVersion=v1.95.0' -X 'main.gitCommitHash=079cf8349a96cfd433cb89945bc467af21818424'" \
        gcluster.go
    python tools/testcluster up --dir /tmp/tc
    python tests/launcher/gcluster_renders/capture.py ~/.cache/elxpk/gcluster-v1.95.0/gcluster /tmp/tc \
        tests/launcher/gcluster_renders

It runs gcluster's own `job submit --dry-run-out FILE` for each command of tests/launcher/gcluster_cases.py (CASES
and FAILURES). Even a
dry run asks three things of the world before it renders; each is answered here, and nothing else is:
- Kubernetes (LocalQueues, ResourceFlavors, node topologies, a JobSet of the same name, through kubectl and
  client-go): the real control plane of tools/testcluster, through KUBECONFIG. It has one LocalQueue in
  `default` (`multislice-queue`, which gcluster auto-discovers) and GKE-labelled TPU nodes.
- `gcloud container clusters describe` (node pools and their machine types): a stub gcloud first on PATH
  prints a GKE Cluster made from that control plane's nodes, one node pool per `cloud.google.com/gke-nodepool`
  label, plus one A3 High GPU pool, which the control plane does not have; `get-credentials` does nothing
  (KUBECONFIG already points at the cluster).
- Compute's `machineTypes.get` (guest CPUs, memory, accelerators), through google-api-go-client with
  Application Default Credentials: HTTPS_PROXY names a proxy on 127.0.0.1 that terminates TLS with a throwaway
  CA (SSL_CERT_FILE, which Go's crypto/x509 reads on Linux) and answers `compute.googleapis.com` from MACHINES
  (GCE's published shapes) and `oauth2.googleapis.com/token` with a token; any other host (telemetry) is refused.
HOME is a temporary folder, so gcluster's state and metrics files go nowhere.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shlex
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from tests.launcher.gcluster_cases import CASES, FAILURES, GCLUSTER_CLUSTER, GCLUSTER_COMMIT, GCLUSTER_VERSION  # noqa: E402
from tools.testcluster.kubeapi import LocalCluster  # noqa: E402

PROJECT, LOCATION, CLUSTER = (flag.split("=", 1)[1] for flag in GCLUSTER_CLUSTER)

# GKE TPU accelerator label -> the GCE machine type of a 4-chip VM of that generation (GKE's TPU docs).
POOL_MACHINES = {"tpu-v5-lite-podslice": "ct5lp-hightpu-4t", "tpu-v6e-slice": "ct6e-standard-4t",
                 "tpu-v5p-slice": "ct5p-hightpu-4t", "tpu-v4-podslice": "ct4p-hightpu-4t",
                 "tpu7x": "tpu7x-standard-4t"}
CPU_MACHINE = "n2-standard-64"  # the control plane's CPU nodes have 64 CPUs and 256 GiB
# machineTypes.get: name -> (guestCpus, memoryMb, accelerators). TPU machine types are answered without
# `accelerators`: gcluster then counts chips from the name's `-4t` (config.ResolveAcceleratorInfo).
MACHINES = {
    "n2-standard-64": (64, 262144, []),
    "ct5lp-hightpu-4t": (112, 196608, []),
    "ct6e-standard-4t": (180, 737280, []),
    "ct5p-hightpu-4t": (208, 458752, []),
    "ct4p-hightpu-4t": (240, 417792, []),
    "tpu7x-standard-4t": (224, 983040, []),
    "a3-highgpu-8g": (208, 1916928, [{"guestAcceleratorType": "nvidia-h100-80gb", "guestAcceleratorCount": 8}]),
}
GPU_POOL = {"name": "a3-highgpu-np", "initialNodeCount": 2,
            "config": {"machineType": "a3-highgpu-8g",
                       "accelerators": [{"acceleratorType": "nvidia-h100-80gb", "acceleratorCount": "8"}]}}


def cluster_description(cluster: LocalCluster) -> dict:
    """A GKE Cluster (the fields gcluster reads) with the control plane's node pools."""
    pools: dict[str, dict] = {}
    for node in cluster.items("/api/v1/nodes"):
        labels = node["metadata"]["labels"]
        name = labels.get("cloud.google.com/gke-nodepool")
        if name is None:
            continue
        accelerator = labels.get("cloud.google.com/gke-tpu-accelerator")
        pool = pools.setdefault(name, {"name": name, "initialNodeCount": 0,
                                       "config": {"machineType": POOL_MACHINES[accelerator] if accelerator
                                                  else CPU_MACHINE}})
        pool["initialNodeCount"] += 1
        if accelerator:
            pool["placementPolicy"] = {"tpuTopology": labels["cloud.google.com/gke-tpu-topology"]}
    return {"name": CLUSTER, "locations": [LOCATION], "nodePools": [*pools.values(), GPU_POOL],
            "autoscaling": {}}


GCLOUD = """#!/bin/sh
echo "gcloud $*" >> "{log}"
case "$1 $2 $3" in
  "container clusters describe") cat "{describe}" ;;
  "container clusters get-credentials") exit 0 ;;
  "config get-value project") echo {project} ;;
  "auth list --filter=status:ACTIVE") echo capture@example.invalid ;;
  *) echo "gcloud stub: not answered: $*" >&2; exit 1 ;;
esac
"""


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a certificate it signs for the Google hosts gcluster calls."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gcluster capture CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "compute.googleapis.com")]))
            .issuer_name(ca_name).public_key(leaf_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("compute.googleapis.com"),
                                                        x509.DNSName("oauth2.googleapis.com")]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = folder / "ca.pem", folder / "leaf.pem", folder / "leaf.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
    return paths


class GoogleApis(BaseHTTPRequestHandler):
    """Inside the TLS tunnel: Compute's machineTypes.get and the OAuth2 token endpoint."""

    protocol_version = "HTTP/1.1"
    calls: list[str] = []

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass  # kept in `calls` instead

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.calls.append(f"GET {self.path}")
        found = re.fullmatch(r"/compute/v1/projects/[^/]+/zones/([^/]+)/machineTypes/([^/?]+)(\?.*)?", self.path)
        if found and found.group(2) in MACHINES:
            cpus, memory, accelerators = MACHINES[found.group(2)]
            body = {"kind": "compute#machineType", "name": found.group(2), "zone": found.group(1),
                    "guestCpus": cpus, "memoryMb": memory}
            self._answer(200, {**body, "accelerators": accelerators} if accelerators else body)
        else:
            self._answer(404, {"error": {"code": 404, "message": f"not answered here: {self.path}"}})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.calls.append(f"POST {self.path}")
        self._answer(200, {"access_token": "capture-token", "expires_in": 3600, "token_type": "Bearer"})


class Proxy(BaseHTTPRequestHandler):
    """HTTPS_PROXY: CONNECT to a Google API host gets a TLS tunnel answered by GoogleApis; anything else 403."""

    tls: ssl.SSLContext

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_CONNECT(self) -> None:
        host = self.path.split(":")[0]
        if host not in ("compute.googleapis.com", "oauth2.googleapis.com"):
            GoogleApis.calls.append(f"refused CONNECT {self.path}")
            self.send_error(403)
            return
        self.send_response(200, "Connection established")
        self.end_headers()
        conn = self.tls.wrap_socket(self.connection, server_side=True)
        GoogleApis(conn, self.client_address, self.server)
        self.close_connection = True


def serve_proxy(folder: Path) -> tuple[ThreadingHTTPServer, Path]:
    ca, leaf, key = make_certificates(folder)
    Proxy.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    Proxy.tls.load_cert_chain(leaf, key)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, ca


def capture(gcluster: Path, run_dir: Path, out: Path) -> None:
    cluster = LocalCluster.from_run_dir(run_dir)
    with tempfile.TemporaryDirectory(prefix="gcluster-capture-") as tmp:
        work = Path(tmp)
        (work / "bin").mkdir()
        (work / "home").mkdir()
        describe = work / "cluster.json"
        describe.write_text(json.dumps(cluster_description(cluster), indent=1), encoding="utf-8")
        stub = work / "bin" / "gcloud"
        stub.write_text(GCLOUD.format(log=work / "gcloud.log", describe=describe, project=PROJECT),
                        encoding="utf-8")
        stub.chmod(0o755)
        adc = work / "adc.json"
        adc.write_text(json.dumps({"type": "authorized_user", "client_id": "capture", "client_secret": "capture",
                                   "refresh_token": "capture"}), encoding="utf-8")
        httpd, ca = serve_proxy(work)
        env = {"PATH": f"{work / 'bin'}:{os.environ['PATH']}", "HOME": str(work / "home"),
               "KUBECONFIG": str(cluster.kubeconfig), "HTTPS_PROXY": f"http://127.0.0.1:{httpd.server_address[1]}",
               "NO_PROXY": "127.0.0.1,localhost", "SSL_CERT_FILE": str(ca),
               "GOOGLE_APPLICATION_CREDENTIALS": str(adc)}
        try:
            commands = {**{name: case.gcluster for name, case in CASES.items()}, **FAILURES}
            for name, command in commands.items():
                path = out / f"{name}.yaml"
                argv = ["job", "submit", *GCLUSTER_CLUSTER, *command]
                done = subprocess.run([str(gcluster), *argv, f"--dry-run-out={path}"], env=env, text=True,
                                      capture_output=True, stdin=subprocess.DEVNULL, timeout=300, check=False)
                if done.returncode != 0 or not path.exists():
                    sys.exit(f"{name}: gcluster exit {done.returncode}\n{done.stdout}\n{done.stderr}\n"
                             f"gcloud: {(work / 'gcloud.log').read_text()}\napis: {GoogleApis.calls}")
                text = path.read_text(encoding="utf-8")
                path.write_text(f"# gcluster {GCLUSTER_VERSION} ({GCLUSTER_COMMIT[:12]}): {shlex.join(argv)}\n{text}",
                                encoding="utf-8")
                print(f"{name}: {path}")
        finally:
            httpd.shutdown()
        print(f"gcloud calls: {(work / 'gcloud.log').read_text().count(chr(10))}; Google API calls: "
              f"{len(GoogleApis.calls)}, of which refused: {[c for c in GoogleApis.calls if c.startswith('refused')]}")


if __name__ == "__main__":
    socket.setdefaulttimeout(60)
    capture(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))

"""The gcluster commands whose renders are vendored in gcluster_renders/, each beside elxpk's equivalent.

gcluster is cluster-toolkit's `gcluster job submit` (docs/gcluster.md). Each case is the argv after
`gcluster job submit` (which `elxpk workload create` runs unchanged: test_gcluster_parity.py) and the argv that asks for the same workload in xpk's
spellings. gcluster's defaults that differ from xpk's are spelled out on the elxpk side: `--restarts` defaults to
1 (`--max-restarts=1`), `--gke-ttl-after-finished` to 1h (`--ttl-seconds-after-finished=3600`), and the pods
name no service account (`--service-account=default`, where xpk's GPU pods name xpk-sa).
"""

from __future__ import annotations

from dataclasses import dataclass

IMAGE = "gcr.io/golden-project/train:1"
COMMAND = "python3 train.py --steps 1000"
SCRATCH = "gs://golden-bucket/scratch"
# Where gcluster's `job` verbs find the cluster (capture.py answers for this one); not part of the workload.
GCLUSTER_CLUSTER = ["--project=golden-project", "--location=us-central1-a", "--cluster=golden-cluster"]
GCLUSTER_VERSION, GCLUSTER_COMMIT = "v1.95.0", "079cf8349a96cfd433cb89945bc467af21818424"
# gcluster's defaults, in xpk's spellings.
GCLUSTER_DEFAULTS = ["--max-restarts=1", "--ttl-seconds-after-finished=3600", "--service-account=default"]


@dataclass(frozen=True)
class Case:
    gcluster: list[str]  # after `gcluster job submit`
    elxpk: list[str]  # after `elxpk workload create`, in today's (xpk) spellings


def _pathways(name: str, tpu: str, slices: int, *extra: str) -> Case:
    return Case(
        gcluster=[f"--name={name}", f"--compute-type={tpu}", f"--num-slices={slices}", f"--image={IMAGE}",
                  "--command", COMMAND, "--pathways", f"--pathways-gcs-location={SCRATCH}", *extra],
        elxpk=[f"--workload={name}", f"--tpu-type={tpu}", f"--num-slices={slices}", f"--docker-image={IMAGE}",
               "--command", COMMAND, f"--pathways-gcs-location={SCRATCH}", *GCLUSTER_DEFAULTS])


# MaxText's elastic-training guide (docs/run_maxtext/run_maxtext_elastic_training.md), as written, with the
# guide's example values; its --command is what bash passes for the guide's continued lines.
MAXTEXT_RUN = "elastic-1203124500"
MAXTEXT_OUTPUT = "gs://golden-bucket/maxtext-runs"
MAXTEXT_IMAGE = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_pre_training:0.2.4"
MAXTEXT_COMMAND = "     ".join([
    "python3 -m maxtext.trainers.pre_train.train", "src/maxtext/configs/base.yml",
    f"base_output_directory={MAXTEXT_OUTPUT}", f"run_name={MAXTEXT_RUN}", "model_name=qwen3-0.6b",
    "dataset_type=synthetic", "per_device_batch_size=1", "max_target_length=2048", "attention=flash",
    "remat_policy=full", "steps=5000", "enable_checkpointing=true", "checkpoint_period=100",
    "enable_single_controller=True", "elastic_enabled=true", "elastic_timeout_seconds=300", "elastic_max_retries=10"])
MAXTEXT_ELASTIC = Case(
    gcluster=["--image", MAXTEXT_IMAGE, "--name", MAXTEXT_RUN, "--pathways", "--compute-type", "ct5lp-hightpu-4t",
              "--topology", "4x4", "--num-slices=3", f"--pathways-gcs-location={MAXTEXT_OUTPUT}",
              "--pathways-elastic-slices=1", "--pathways-max-slice-restarts=10", f"--command={MAXTEXT_COMMAND}"],
    # xpk's v5litepod-16 is the guide's ct5lp-hightpu-4t VMs in a 4x4 slice.
    elxpk=[f"--workload={MAXTEXT_RUN}", "--tpu-type=v5litepod-16", "--num-slices=3", f"--docker-image={MAXTEXT_IMAGE}",
           f"--pathways-gcs-location={MAXTEXT_OUTPUT}", "--elastic-slices=1", "--max-slice-restarts=10",
           f"--command={MAXTEXT_COMMAND}", *GCLUSTER_DEFAULTS])
# gcluster counts v5p in chips (its v5p-8 is 2x2x2), xpk in TensorCores (v5p-16 is 2x2x2): the same slice.
_HEADLESS = _pathways("gc-headless", "v5p-8", 2, "--pathways-headless")

CASES: dict[str, Case] = {
    "tpu-v6e-16x2": Case(
        gcluster=["--name=gc-tpu", "--compute-type=v6e-16", "--num-slices=2", f"--image={IMAGE}",
                  "--command", COMMAND],
        elxpk=["--workload=gc-tpu", "--tpu-type=v6e-16", "--num-slices=2", "--no-pathways",
               f"--docker-image={IMAGE}", "--command", COMMAND, *GCLUSTER_DEFAULTS]),
    "pathways-v5litepod-16x3": _pathways("gc-pathways", "v5litepod-16", 3),
    "elastic-v5litepod-16x3": MAXTEXT_ELASTIC,
    # gcluster asks for an image and a command even headless; neither reaches the head (no user container).
    "headless-v5p-16x2": Case(_HEADLESS.gcluster,
                              [a.replace("v5p-8", "v5p-16") for a in _HEADLESS.elxpk
                               if not a.startswith("--docker-image") and a not in ("--command", COMMAND)]
                              + ["--headless"]),
    # gcluster v1.95.0 refuses xpk's device type here (`--compute-type=h100-80gb-8`: "could not be classified as
    # GPU or TPU"), so the GCE machine type, which elxpk takes too.
    "gpu-a3-highgpu-8g": Case(
        gcluster=["--name=gc-gpu", "--compute-type=a3-highgpu-8g", "--num-nodes=2", f"--image={IMAGE}",
                  "--command", COMMAND],
        elxpk=["--workload=gc-gpu", "--device-type=a3-highgpu-8g", "--num-nodes=2", f"--docker-image={IMAGE}",
               "--command", COMMAND, *GCLUSTER_DEFAULTS]),
}

# gcluster renders of a failure its users report, vendored for the tests that show it (not compared with
# elxpk's render). ml-auto-solutions#1369: --restart-on-exit-codes puts a podFailurePolicy on Pathways workers
# whose pods restart OnFailure; the API server admits the JobSet, and the Job the JobSet controller makes
# of the workers is refused, so the head runs alone.
FAILURES: dict[str, list[str]] = {
    "pathways-restart-on-exit-codes": [*_pathways("gc-exit-codes", "v5litepod-16", 2).gcluster,
                                       "--restart-on-exit-codes=42,75"],
}

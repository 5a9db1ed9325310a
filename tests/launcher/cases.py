"""Golden inputs: xpk's own golden flags (recipes/Workload_create_pathways.md) plus the elastic shapes.

Each case is the argv after `elxpk workload create`; its manifest lives in goldens/<name>.yaml.
"""

from __future__ import annotations

XPK_GOLDEN = ["--project=golden-project", "--zone=us-central1-a", "--cluster=golden-cluster",
              "--workload=golden-workload"]

# The user's MaxText command of the demo golden, as typed (elxpk adds its overrides after the config file).
MAXTEXT_DEMO_COMMAND = ("python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml "
                        "model_name=qwen3-0.6b per_device_batch_size=4 steps=2000 dataset_type=grain "
                        "grain_train_files='gs://golden-bucket/data/*.array_record' grain_use_elastic_iterator=true "
                        "packing=false")

CASES: dict[str, list[str]] = {
    # Same inputs as xpk's Workload_create_pathways golden, so the two manifests can be diffed.
    "pathways-v5p-8": [*XPK_GOLDEN, "--command", "bash hello", "--tpu-type=v5p-8", "--num-slices=1"],
    # The MaxText elastic guide's shape: v5litepod-16 x 3, tolerate losing 1 slice, 10 restarts each.
    "elastic-v5litepod-16x3": [*XPK_GOLDEN, "--tpu-type=v5litepod-16", "--num-slices=3", "--elastic-slices=1",
                               "--max-slice-restarts=10", "--docker-image=gcr.io/golden-project/maxtext:latest",
                               "--command", "python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml",
                               "--checkpoint-dir=gs://golden-bucket/run/checkpoints", "--checkpoint-period=100",
                               "--elastic-timeout-seconds=300", "--elastic-max-retries=10",
                               "--elastic-min-slice-count=2", "--max-restarts=2"],
    # The MaxText elastic demo (Qwen3 0.6B, v5litepod-16 x 3, tolerate losing 1 slice) with --trainer maxtext:
    # the trainer settings become MaxText overrides after the config file (docs/maxtext.md).
    "maxtext-qwen3-v5litepod-16x3": [
        *XPK_GOLDEN, "--tpu-type=v5litepod-16", "--num-slices=3", "--elastic-slices=1", "--max-slice-restarts=10",
        "--trainer", "maxtext", "--docker-image=gcr.io/golden-project/maxtext:0.2.5",
        "--command", MAXTEXT_DEMO_COMMAND,
        "--checkpoint-dir=gs://golden-bucket/qwen/ckpt", "--checkpoint-period=100", "--elastic-max-retries=10",
        "--elastic-timeout-seconds=300"],
    "headless-v5p-16x2": [*XPK_GOLDEN, "--tpu-type=v5p-2x2x2", "--num-slices=2", "--headless",
                          "--elastic-slices=1", "--max-slice-restarts=3"],
    "multi-controller-v6e-16x2": [*XPK_GOLDEN, "--tpu-type=v6e-16", "--num-slices=2", "--no-pathways",
                                  "--max-restarts=5", "--docker-image=gcr.io/golden-project/train:1",
                                  "--command", "python3 train.py --steps 1000", "--priority=high"],
    "trainer-v5litepod-16x3": [*XPK_GOLDEN, "--tpu-type=v5litepod-16", "--num-slices=3", "--trainer",
                               "--docker-image=gcr.io/golden-project/elxpk-trainer:0.1.0", "--elastic-slices=1",
                               "--max-slice-restarts=10", "--elastic-max-retries=10",
                               "--checkpoint-dir=gs://golden-bucket/trainer/checkpoints",
                               "--checkpoint-period=100", "--steps=5000", "--model=1b", "--compute-dtype=bfloat16",
                               "--global-batch=96", "--seed=7", "--data=gs://golden-bucket/tokens/train.npy",
                               "--log-period=10", "--profiler=xplane", "--skip-first-n-steps-for-profiler=20",
                               "--profiler-steps=3"],
    "custom-args-env": [*XPK_GOLDEN, "--tpu-type=tpu7x-8", "--num-slices=2", "--command", "bash run.sh",
                        "--custom-pathways-proxy-server-args=--xla_tpu_foo=1 --label='a b'",
                        "--custom-pathways-server-args=--enable_x", "--custom-pathways-worker-args=--w=1",
                        "--worker-image=gcr.io/golden-project/worker:2", "--env", "GREETING=hello: world",
                        "--env", "EMPTY=", "--queue=team-queue", "--namespace=team-a", "--priority=very-low",
                        "--termination-grace-period-seconds=120", "--ttl-seconds-after-finished=600",
                        "--pathways-gcs-location=gs://golden-bucket/scratch"],
}

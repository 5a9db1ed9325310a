"""Will it fit, before it is submitted (issue 42.3): `python -m trainer --compile-only` compiles the real step
for a TPU slice this CPU machine does not have, and `elxpk workload create --check-fit` refuses a workload
whose step does not fit, exit 2 with one line, nothing written.

Needs libtpu (the `tpu` extra pins the one jax[tpu]==0.10.2 pins); without it the tier skips with one line,
and under CI=true, where .ci/run installs it (`pip install -e '.[dev,tpu]'`), it fails instead.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from elxpk_contract.exit_codes import BAD_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
ELXPK = str(Path(sys.executable).with_name("elxpk"))
# The tiny preset, shorter: a step that compiles in seconds for a TPU.
SMALL = ["--seq-len", "16", "--vocab-size", "64", "--d-model", "32", "--n-layers", "2", "--n-heads", "2",
         "--d-ff", "64"]


@pytest.fixture(scope="module")
def libtpu() -> None:
    if importlib.util.find_spec("libtpu") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("libtpu is not installed: the tpu extra pins it (pip install -e '.[dev,tpu]')", pytrace=False)
        pytest.skip("compile-only tier: libtpu is not installed (pip install -e '.[dev,tpu]')")


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_step_compiles_for_tpu_slices_and_its_memory_is_reported(libtpu, tmp_path):
    """Two v6e:2x2 slices that may resize onto one: the step at full width, and on the one slice."""
    done = _run([sys.executable, "-m", "trainer", "--compile-only", "--compile-topology", "v6e:2x2",
                 "--num-slices", "2", "--elastic-min-slice-count", "1", "--global-batch", "8", *SMALL], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["device_kind"].startswith("TPU v6") and report["devices_per_slice"] == 4
    fewest = report["fewest_slices"]
    assert (report["num_slices"], report["mesh"], fewest["num_slices"], fewest["mesh"]) == (
        2, {"slice": 2, "data": 4}, 1, {"slice": 1, "data": 4})
    for step in (report, fewest):
        analysis = step["memory_analysis"]
        assert step["bytes_per_device"] == (analysis["argument_size_in_bytes"] + analysis["output_size_in_bytes"]
                                            + analysis["temp_size_in_bytes"] - analysis["alias_size_in_bytes"]) > 0
    assert report["settings"]["compute_dtype"] == "bfloat16"  # auto, as the TPU resolves it
    assert report["settings"]["d_model"] == 32 and report["settings"]["global_batch"] == 8
    assert not list(tmp_path.iterdir())  # nothing written: no run dir, no checkpoint, no cache
    # Said first, on stderr (stdout is the report): what is compiled, for what, and about how long.
    said = [line for line in done.stderr.splitlines() if line.startswith("compile-only: ")]
    assert said[0] == ("compile-only: compiling the train step of --model tiny (19,104 parameters; 8 examples of 16 "
                       "tokens a step, 1 a device; remat none) for 2 x v6e:2x2 (8 devices) on this machine's CPU, no "
                       "chip needed (twice: also on the fewest slices a resize reaches): well under a minute on 2 "
                       "cores (more on a busy machine); a line every 20 s until it is done"), said
    assert all(line.startswith("compile-only: still compiling for 2 x v6e:2x2 (8 devices): ") for line in said[1:])


def test_the_fewest_slices_step_is_compiled_only_where_asked(libtpu, tmp_path):
    """`--check-fit` passes --no-compile-fewest-slices: its decision is the full width's, one compile."""
    done = _run([sys.executable, "-m", "trainer", "--compile-only", "--compile-topology", "v6e:2x2",
                 "--num-slices", "2", "--elastic-min-slice-count", "1", "--global-batch", "8", *SMALL,
                 "--no-compile-fewest-slices"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "fewest_slices" not in json.loads(done.stdout) and "twice" not in done.stderr


def test_a_topology_jax_does_not_name_is_refused_before_anything_starts(tmp_path):
    done = _run([sys.executable, "-m", "trainer", "--compile-only", "--compile-topology", "v5litepod-16"], tmp_path)
    assert done.returncode == BAD_SETTINGS.code
    assert done.stderr.splitlines() == ["error: --compile-topology 'v5litepod-16': name a TPU slice as jax does, "
                                        "GENERATION:TOPOLOGY, e.g. v5e:4x4 or v5p:2x2x2 (elxpk's v5litepod-16 is "
                                        "v5e:4x4)"]
    assert not list(tmp_path.iterdir())


def test_create_check_fit_refuses_a_step_past_the_chip_and_passes_one_that_fits(libtpu, tmp_path):
    """The small model at 32768 tokens an example, everything kept for the backward pass: its attention
    scores alone need about 34 GiB a device, past a v6e chip's 32 GiB, and the step still compiles in seconds.
    (--remat-policy auto would fit it: 25 GiB with a policy that recomputes them.)"""
    out = tmp_path / "manifest.yaml"
    long = [*SMALL[2:], "--seq-len", "32768", "--remat-policy", "none"]
    done = _run([ELXPK, "workload", "create", "--workload", "fit", "--tpu-type", "v6e-4", "--num-slices", "1",
                 "--trainer", "--docker-image", "trainer:1", "--global-batch", "8", "--dry-run", "--dry-run-out", str(out),
                 "--check-fit", "--command", " ".join(long)], tmp_path)
    assert done.returncode == BAD_SETTINGS.code, done.stderr[-3000:]
    *said, line = done.stderr.splitlines()
    # What is compiled, relayed from the trainer as it comes, then the one error line.
    assert said[0] == ("check-fit: starting python -m trainer --compile-only for 1 x v6e-4 (v6e:2x2); it imports "
                       "jax, then says what it compiles and about how long it takes")
    assert said[1].startswith("check-fit: compiling the train step of --model tiny (") and (
        "parameters; 8 examples of 32768 tokens a step, 2 a device; remat none) for 1 x v6e:2x2 (4 devices) on this "
        "machine's CPU, no chip needed: ") in said[1], said
    assert all(s.startswith("check-fit: still compiling for 1 x v6e:2x2 (4 devices): ") for s in said[2:])
    assert line.startswith("error: --check-fit: --model tiny --d-model 32 --n-layers 2 --d-ff 64 --seq-len 32768 "
                           "--vocab-size 64 --global-batch 8 --remat-policy none: the train step does not fit on 1 x v6e:2x2: XLA: "
                           "RESOURCE_EXHAUSTED"), line
    assert "exceeds available HBM" in line and line.endswith("use more slices or a larger slice")
    assert not out.exists()
    # The same at 16 tokens fits: one line on stderr, and the manifest is written as without the check.
    done = _run([ELXPK, "workload", "create", "--workload", "fit", "--tpu-type", "v6e-4", "--num-slices", "1",
                 "--trainer", "--docker-image", "trainer:1", "--global-batch", "8", "--dry-run", "--dry-run-out",
                 str(out), "--check-fit", "--command", " ".join(SMALL)], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    *said, fits, wrote = done.stderr.splitlines()
    assert said[0].startswith("check-fit: starting ") and said[1].startswith("check-fit: compiling the train step")
    assert fits.startswith("check-fit: the train step needs 0.") and fits.endswith(
        "GiB per device on 1 x v6e-4 (v6e:2x2, mesh 1 x 4), 0% of the device's 31.50 GiB"), fits
    assert wrote == f"wrote {out}" and "kind: JobSet" in out.read_text()


# Every slice of the launcher's catalog, as jax describes it from the name the catalog gives it.
EVERY_CATALOG_SLICE = """
import json
from elxpk.catalog import families, lookup
from trainer.compile_only import topology_devices
out = {}
for family in families():
    for topology in family.topologies:
        tpu = lookup(f"{family.prefix}-{topology}")
        devices = topology_devices(tpu.jax_topology, 1)
        out[tpu.name] = [tpu.jax_topology, tpu.chips_per_slice, len(devices)]
print(json.dumps(out))
"""


def test_jax_describes_every_slice_of_the_catalog_by_the_name_the_catalog_gives_it(libtpu, tmp_path):
    """--check-fit passes the catalog's name (v5litepod-16 -> v5e:4x4) to --compile-topology: jax knows each
    one, with a device per chip or per core (v4 and tpu7x: 2 per chip), which the HBM share divides by."""
    from elxpk.catalog import all_names

    done = _run([sys.executable, "-c", EVERY_CATALOG_SLICE], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    described = json.loads(done.stdout)
    assert len(described) == len({name for name in all_names() if name.split("-")[-1].isdigit()})
    for name, (topology, chips, devices) in described.items():
        per_chip = 2 if name.startswith(("v4-", "tpu7x-")) else 1
        assert devices == chips * per_chip, (name, topology, chips, devices)


def test_compile_executables_writes_each_step_ahead_for_every_host_and_nothing_else(libtpu, tmp_path):
    """#49: the workload's step and, with resizes on, the fewest slices' go into the run's executable store,
    one entry per host of the group (a v5e:4x4 slice is 4 hosts: two slices of it, 8 processes), each keyed as
    that process's own and whole; no other file is written."""
    from trainer.core.executable_entries import MAGIC

    store = tmp_path / "xla-cache-executables"
    done = _run([sys.executable, "-m", "trainer", "--compile-only", "--compile-topology", "v5e:4x4",
                 "--num-slices", "2", "--elastic-min-slice-count", "1", "--global-batch", "32",
                 "--compile-executables", str(store), *SMALL], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["executable_store"] == report["fewest_slices"]["executable_store"] == "written"
    assert [p.name for p in tmp_path.iterdir()] == [store.name] and store.stat().st_mode & 0o777 == 0o700
    keys = []
    for entry in store.iterdir():
        magic, header, _ = entry.read_bytes().split(b"\n", 2)
        assert magic + b"\n" == MAGIC
        keys.append(json.loads(header)["key"])
    assert sorted((k["mesh"]["shape"][0], *k["process"]) for k in keys) == sorted(
        (slices, i, 8) for slices in (1, 2) for i in range(8))
    assert {k["versions"]["platform"] for k in keys} == {"tpu"}


@pytest.mark.slow
def test_the_readme_examples_that_run_the_bundled_trainer_pass_check_fit(libtpu, tmp_path):
    """Each README "On GKE" render that runs the bundled trainer (`--trainer`, or gcluster's `-e "python3 -m
    trainer ..."`), with `--check-fit` added as its text suggests: the step is compiled for its slice and fits
    (1b on 3 x v5litepod-16: about a minute of CPU). The MaxText example is left to MaxText's train_compile."""
    from tests.support.readme_commands import gke_commands

    bundled = [argv for argv in gke_commands() if argv[1] != "translate" and "maxtext" not in argv]
    assert len(bundled) >= 3 and any("1b" in argv for argv in bundled), bundled
    for argv in bundled:
        done = _run([ELXPK, *argv[1:], "--check-fit"], tmp_path)
        assert done.returncode == 0, (argv, done.stderr[-3000:])
        fits = [line for line in done.stderr.splitlines() if line.startswith("check-fit: the train step needs ")]
        assert len(fits) == 1 and "% of the device's 15.75 GiB" in fits[0], (argv, done.stderr[-3000:])

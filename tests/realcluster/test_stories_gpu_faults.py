"""Stories 2, 3 and 5 of #31 for the GPU shape (`workload create --trainer --device-type h100-80gb-8 --num-nodes
2` on the process pool): the same checks as the TPU shape's (tests/realcluster/story_checks.py), on a node
group that is ONE slice of 16 devices over 2 processes. So "a slice killed" is one node of the group under
`kill-slice --slice 0 --vm 1 --mode delete` (the real JobSet restart takes the other node's pod down with
it) and the whole group under `--mode evict`; either way the group restarts and resumes from its newest
checkpoint on gs://. Every workload's records are beside its checkpoints on gs://, where `workload create`
renders them, and are read from there alone (stories.py). The reference is this shape's own uninterrupted
run on the cluster: no local run reproduces its all-reduce order bit for bit (test_stories_gpu.py says why),
while two runs of the same shape must agree bitwise.

Story 5: the node group dies before step 10 on every attempt (`--fault=0@10`: the group is slice 0, so both
processes, NODE_RANK 0 and 1, exit 137 there as a lost node group would); `--elastic-stop-on-repeat 2` ends
the run within its count (the attempt history on gs:// and the run dir count the attempts, every process of
the last exits 70, the JobSet fails with restarts left) and `status --why` names the cause, `trainer-stopped`.

Story 4 (`--checkpoint-pre-start` of a `--trainer maxtext` workload) has no GPU version: elxpk refuses
`--trainer maxtext` on GPUs (its settings are placed for TPU runs, elxpk/create/gpu.py); the TPU shape's
story 4 is tests/realcluster/test_pre_start_process.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.realcluster.stories import GPU_NODE_GROUP, Story, timed
from tests.realcluster.story_checks import (
    dies_on_every_attempt_stops_within_its_count,
    exit_70_fails_the_jobset_at_once,
    exit_75_is_retried_inside_its_budget,
    killed_slice_resumes_bitwise,
    unique,
)
from tools.testcluster.kubeapi import LocalCluster


@pytest.fixture(scope="module")
def gpu_story(testcluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Story:
    nodes = testcluster.items("/api/v1/nodes", labelSelector="type=virtual-kubelet,"
                                                            "cloud.google.com/gke-accelerator=nvidia-h100-80gb")
    if len(nodes) < 2:
        pytest.fail("the test cluster has no h100-80gb-8 process pool of 2 nodes: start it with "
                    "`tools/testcluster up` (its default --process-pools has h100-80gb-8:2)", pytrace=False)
    return Story(testcluster, GPU_NODE_GROUP, tmp_path_factory.mktemp("gpu-stories"), records_on_gs=True)


@pytest.fixture(scope="module")
def gpu_reference(gpu_story: Story) -> Path | str:
    """The shape's uninterrupted run: Succeeded, every step once."""
    took = timed()
    name = unique("g1")
    run = gpu_story.create(name)
    done = gpu_story.wait_done(name)
    assert done.returncode == 0, gpu_story.explain(name, done)
    gpu_story.delete(name)
    print(f"\nGPU reference ({GPU_NODE_GROUP.name}): {took()} s")
    return run


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["delete", "evict"])
def test_story2_gpu_a_killed_node_restarts_the_group_and_resumes_bitwise(gpu_story: Story,
                                                                         gpu_reference: Path | str,
                                                                         mode: str) -> None:
    print("\n" + killed_slice_resumes_bitwise(gpu_story, gpu_reference, mode))


@pytest.mark.slow
def test_story3_gpu_exit_75_is_retried_inside_its_budget(gpu_story: Story) -> None:
    print("\n" + exit_75_is_retried_inside_its_budget(gpu_story, unique("g3r")))


@pytest.mark.slow
def test_story3_gpu_exit_70_fails_the_jobset_at_once(gpu_story: Story) -> None:
    print("\n" + exit_70_fails_the_jobset_at_once(gpu_story, unique("g3u")))


@pytest.mark.slow
def test_story5_gpu_a_group_that_dies_on_every_attempt_stops_within_its_count(gpu_story: Story) -> None:
    print("\n" + dies_on_every_attempt_stops_within_its_count(gpu_story, unique("g5")))

package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpandIsKubernetesExpansion(t *testing.T) {
	env := map[string]string{"A": "1", "JOBSET_NAME": "js"}
	cases := map[string]string{
		"$(A)":               "1",
		"x$(A)y$(A)":         "x1y1",
		"$$(A)":              "$(A)", // escaped
		"$(B)":               "$(B)", // undefined: left as written
		"$(JOBSET_NAME)-0.x": "js-0.x",
		"$":                  "$",
		"a$b":                "a$b",
		"$(unclosed":         "$(unclosed",
		"$$":                 "$",
	}
	for in, want := range cases {
		if got := expand(in, env); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFieldRefs(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u",
		Labels:      map[string]string{"jobset.sigs.k8s.io/job-index": "1"},
		Annotations: map[string]string{"batch.kubernetes.io/job-completion-index": "2"}},
		Spec: corev1.PodSpec{NodeName: "n"}}
	cases := map[string]string{
		"metadata.name": "p", "metadata.namespace": "ns", "metadata.uid": "u", "spec.nodeName": "n",
		"status.podIP": "127.1.2.3", "status.hostIP": "127.1.1.1",
		"metadata.labels['jobset.sigs.k8s.io/job-index']":                  "1",
		"metadata.annotations['batch.kubernetes.io/job-completion-index']": "2",
		"metadata.labels['missing']":                                       "",
	}
	for path, want := range cases {
		got, err := fieldRef(path, pod, "127.1.2.3", "127.1.1.1")
		if err != nil || got != want {
			t.Errorf("fieldRef(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := fieldRef("spec.containers", pod, "", ""); err == nil {
		t.Error("an unsupported fieldPath must be an error")
	}
}

func TestTrainerImage(t *testing.T) {
	for image, want := range map[string]bool{
		"elxpk-trainer": true, "reg.io/p/r/elxpk-trainer:0.1.0": true, "localhost:5000/elxpk-trainer": true,
		"reg.io/elxpk-trainer@sha256:abc": true, "reg.io/elxpk-trainer-old:1": false, "busybox": false,
		"reg.io/elxpk-trainer/other:1": false,
	} {
		if got := trainerImage(image); got != want {
			t.Errorf("trainerImage(%q) = %v, want %v", image, got, want)
		}
	}
}

func TestTPUEnvOfAMultiVMSlice(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Hostname: "w-slice-job-1-2", Subdomain: "w"}}
	env := map[string]string{}
	for _, e := range tpuEnv(&TPUHost{Type: "v5litepod-16", Topology: "4x4", VMs: 4, Chips: 4}, pod, "2") {
		env[e.Name] = e.Value
	}
	want := map[string]string{
		"TPU_WORKER_ID":        "2",
		"TPU_WORKER_HOSTNAMES": "w-slice-job-1-0.w,w-slice-job-1-1.w,w-slice-job-1-2.w,w-slice-job-1-3.w",
		"TPU_HOST_BOUNDS":      "2,2,1", "TPU_CHIPS_PER_HOST_BOUNDS": "2,2,1", "TPU_TOPOLOGY": "4x4",
		"XLA_FLAGS": "--xla_force_host_platform_device_count=4",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
}

func TestGPUEnvShowsTheRequestedGPUsAsCPUDevices(t *testing.T) {
	env := map[string]string{}
	for _, e := range gpuEnv(8) {
		env[e.Name] = e.Value
	}
	if env["XLA_FLAGS"] != "--xla_force_host_platform_device_count=8" || env["JAX_PLATFORMS"] != "cpu" {
		t.Errorf("gpuEnv(8) = %v", env)
	}
}

func TestMegascaleCoordinatorIsWorkerZeroOfSliceZero(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Hostname: "st-slice-job-1-0", Subdomain: "st"}}
	pod.Labels = map[string]string{"jobset.sigs.k8s.io/jobset-name": "st",
		"jobset.sigs.k8s.io/replicatedjob-name": "slice-job"}
	env := map[string]string{}
	for _, e := range tpuEnv(&TPUHost{Type: "v4-8", Topology: "2x2x1", VMs: 1, Chips: 4}, pod, "0") {
		env[e.Name] = e.Value
	}
	if got := env["MEGASCALE_COORDINATOR_ADDRESS"]; got != "st-slice-job-0-0.st" {
		t.Errorf("MEGASCALE_COORDINATOR_ADDRESS = %q, want st-slice-job-0-0.st", got)
	}
	if got := megascaleCoordinator(&corev1.Pod{}); got != "" {
		t.Errorf("a pod of no JobSet got %q", got)
	}
}

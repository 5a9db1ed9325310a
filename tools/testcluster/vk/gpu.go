package main

// What a GPU node stands for: one GKE GPU VM (an A3 or A4 machine) whose GPUs are CPU devices here.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// GPUHost is one node of a GPU node pool of type Type (nodes.py: GPU_TYPES), with GPUs GPUs.
type GPUHost struct {
	Type string `json:"type"` // h100-80gb-8
	GPUs int    `json:"gpus"` // GPUs per node
}

// gpuEnv is the table of what a container asking for `gpus` of nvidia.com/gpu gets on such a node: JAX sees
// that many CPU devices, as a TPU VM's chips are CPU devices here (tpuEnv). Nothing else: on GKE the GPU
// device plugin mounts the devices and the driver's libraries and sets no variable jax reads, and the
// jax.distributed group of a GPU workload comes from the env that xpk's render (and elxpk's) sets itself
// (JAX_COORDINATOR_ADDRESS and _PORT, NNODES, NODE_RANK), with the pod names resolving through the hosts
// file as through the headless Service's DNS.
func gpuEnv(gpus int) []corev1.EnvVar {
	if gpus < 1 {
		gpus = 1
	}
	return []corev1.EnvVar{
		{Name: "JAX_PLATFORMS", Value: "cpu"},
		{Name: "XLA_FLAGS", Value: fmt.Sprintf("--xla_force_host_platform_device_count=%d", gpus)},
	}
}

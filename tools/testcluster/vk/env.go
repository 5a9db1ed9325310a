package main

// What a container's process is given, as a kubelet and GKE's TPU provisioning would give it: the image's
// command source, the env (downward API resolved, $(VAR) expanded) and the TPU VM's own env.

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// TPUHost is what a TPU node stands for: one VM of a slice of TPU type Type (cluster_up.py: TPU_TYPES).
type TPUHost struct {
	Type     string `json:"type"`     // v5p-8
	Topology string `json:"topology"` // 2x2x1
	VMs      int    `json:"vms"`      // VMs per slice
	Chips    int    `json:"chips"`    // chips per VM
}

// tpuEnv is the table of what GKE's TPU provisioning injects into a container that requests google.com/tpu
// on a TPU node pool (the GKE TPU webhook for Indexed Jobs and JobSets), plus what makes this machine's
// CPU stand for the VM's chips: JAX sees Chips CPU devices (a v5p-8 VM shows 4).
func tpuEnv(t *TPUHost, pod *corev1.Pod, index string) []corev1.EnvVar {
	chipsPerHost := chipsPerHostBounds(t.Chips)
	hostBounds := hostBounds(t.Topology, chipsPerHost)
	wrap := strings.TrimSuffix(strings.Repeat("false,", 3), ",")
	ports := make([]string, t.Chips)
	for i := range ports {
		ports[i] = strconv.Itoa(8431 + i)
	}
	env := map[string]string{
		"TPU_WORKER_ID":             index,
		"TPU_WORKER_HOSTNAMES":      strings.Join(workerHostnames(pod, t.VMs), ","),
		"TPU_SKIP_MDS_QUERY":        "true",
		"TPU_ACCELERATOR_TYPE":      t.Type,
		"TPU_TOPOLOGY":              t.Topology,
		"TPU_TOPOLOGY_WRAP":         wrap,
		"TPU_CHIPS_PER_HOST_BOUNDS": chipsPerHost,
		"TPU_HOST_BOUNDS":           hostBounds,
		"CHIPS_PER_HOST_BOUNDS":     chipsPerHost,
		"HOST_BOUNDS":               hostBounds,
		"TPU_RUNTIME_METRICS_PORTS": strings.Join(ports, ","),
		// The chips, as CPU devices of this machine.
		"JAX_PLATFORMS": "cpu",
		"XLA_FLAGS":     fmt.Sprintf("--xla_force_host_platform_device_count=%d", t.Chips),
	}
	if coordinator := megascaleCoordinator(pod); coordinator != "" {
		env["MEGASCALE_COORDINATOR_ADDRESS"] = coordinator
	}
	names := make([]string, 0, len(env))
	for name := range env {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]corev1.EnvVar, 0, len(names))
	for _, name := range names {
		out = append(out, corev1.EnvVar{Name: name, Value: env[name]})
	}
	return out
}

// megascaleCoordinator: what GKE's TPU webhook gives a multislice JobSet's pods as
// MEGASCALE_COORDINATOR_ADDRESS (xpk and elxpk render MEGASCALE_NUM_SLICES and MEGASCALE_SLICE_ID but no
// coordinator): the DNS name of worker 0 of slice 0 of the pod's replicated job,
// <jobset>-<replicatedJob>-0-0.<subdomain>. "" for a pod of no JobSet. A value in the pod's own env wins,
// as the table's values are the base the container's env is laid over.
func megascaleCoordinator(pod *corev1.Pod) string {
	jobset := pod.Labels["jobset.sigs.k8s.io/jobset-name"]
	replicated := pod.Labels["jobset.sigs.k8s.io/replicatedjob-name"]
	if jobset == "" || replicated == "" {
		return ""
	}
	host := fmt.Sprintf("%s-%s-0-0", jobset, replicated)
	if pod.Spec.Subdomain != "" {
		host += "." + pod.Spec.Subdomain
	}
	return host
}

// chipsPerHostBounds: 4 chips per VM are a 2x2x1 block, 8 a 2x4x1, 1 a 1x1x1 (the shapes of TPU VMs).
func chipsPerHostBounds(chips int) string {
	switch chips {
	case 1:
		return "1,1,1"
	case 8:
		return "2,4,1"
	default:
		return "2,2,1"
	}
}

// hostBounds: the slice's topology divided by the VM's block, per dimension (a 4x4 of 2x2 VMs is 2,2,1).
func hostBounds(topology, chipsPerHost string) string {
	dims := strings.Split(topology, "x")
	for len(dims) < 3 {
		dims = append(dims, "1")
	}
	block := strings.Split(chipsPerHost, ",")
	out := make([]string, 3)
	for i := range out {
		d, _ := strconv.Atoi(dims[i])
		b, _ := strconv.Atoi(block[i])
		if b < 1 || d < b {
			out[i] = "1"
			continue
		}
		out[i] = strconv.Itoa(d / b)
	}
	return strings.Join(out, ",")
}

// workerHostnames: the DNS names of the slice's VMs. A JobSet pod's hostname is
// <jobset>-<replicatedJob>-<jobIndex>-<podIndex> under subdomain <jobset>; the slice's other workers differ
// only in podIndex. A pod without a hostname (a bare Job) names itself only.
func workerHostnames(pod *corev1.Pod, vms int) []string {
	host := pod.Spec.Hostname
	if host == "" {
		return []string{pod.Name}
	}
	suffix := ""
	if pod.Spec.Subdomain != "" {
		suffix = "." + pod.Spec.Subdomain
	}
	cut := strings.LastIndex(host, "-")
	if cut < 0 || vms <= 1 {
		return []string{host + suffix}
	}
	out := make([]string, vms)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d%s", host[:cut], i, suffix)
	}
	return out
}

// trainerImage: an image whose repository ends in elxpk-trainer (any registry, tag or digest) is the image
// trainer/Dockerfile builds, and runs from the project's own checkout.
func trainerImage(image string) bool {
	repo := image
	if at := strings.Index(repo, "@"); at >= 0 {
		repo = repo[:at]
	}
	if colon := strings.LastIndex(repo, ":"); colon > strings.LastIndex(repo, "/") {
		repo = repo[:colon]
	}
	return path.Base(repo) == "elxpk-trainer"
}

// trainerImageEnv is trainer/Dockerfile's ENV, with PYTHONPATH the checkout instead of /opt/elxpk, after
// `before` when the node was given a PYTHONPATH (the tests' XLA cache site folder: nodes.py).
func trainerImageEnv(repo, before string) map[string]string {
	pythonPath := repo
	if before != "" {
		pythonPath = before + ":" + repo
	}
	return map[string]string{"PYTHONPATH": pythonPath, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
		"PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
}

// trainerEntrypoint is trainer/Dockerfile's ENTRYPOINT.
var trainerEntrypoint = []string{"python", "-m", "trainer"}

// resolveEnv is the container's env as a kubelet makes it: envFrom, then env in order, each value with the
// $(VAR)s of the variables before it expanded, fieldRefs read from the pod (status.podIP being the pod's
// address on this machine).
func resolveEnv(c *corev1.Container, pod *corev1.Pod, podIP, hostIP string, base map[string]string,
	configMaps corev1listers.ConfigMapLister, secrets corev1listers.SecretLister) (map[string]string, error) {
	env := map[string]string{}
	for k, v := range base {
		env[k] = v
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := configMaps.ConfigMaps(pod.Namespace).Get(from.ConfigMapRef.Name)
			if err != nil {
				if from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
					continue
				}
				return nil, fmt.Errorf("envFrom configMap %q: %w", from.ConfigMapRef.Name, err)
			}
			for k, v := range cm.Data {
				env[from.Prefix+k] = v
			}
		case from.SecretRef != nil:
			s, err := secrets.Secrets(pod.Namespace).Get(from.SecretRef.Name)
			if err != nil {
				if from.SecretRef.Optional != nil && *from.SecretRef.Optional {
					continue
				}
				return nil, fmt.Errorf("envFrom secret %q: %w", from.SecretRef.Name, err)
			}
			for k, v := range s.Data {
				env[from.Prefix+k] = string(v)
			}
		}
	}
	for _, e := range c.Env {
		value := expand(e.Value, env)
		if e.ValueFrom != nil {
			v, err := valueFrom(e.ValueFrom, c, pod, podIP, hostIP, configMaps, secrets)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			value = v
		}
		env[e.Name] = value
	}
	return env, nil
}

func valueFrom(from *corev1.EnvVarSource, c *corev1.Container, pod *corev1.Pod, podIP, hostIP string,
	configMaps corev1listers.ConfigMapLister, secrets corev1listers.SecretLister) (string, error) {
	switch {
	case from.FieldRef != nil:
		return fieldRef(from.FieldRef.FieldPath, pod, podIP, hostIP)
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := configMaps.ConfigMaps(pod.Namespace).Get(ref.Name)
		if err == nil {
			if v, ok := cm.Data[ref.Key]; ok {
				return v, nil
			}
		}
		if ref.Optional != nil && *ref.Optional {
			return "", nil
		}
		return "", fmt.Errorf("configMap %q key %q not found", ref.Name, ref.Key)
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := secrets.Secrets(pod.Namespace).Get(ref.Name)
		if err == nil {
			if v, ok := s.Data[ref.Key]; ok {
				return string(v), nil
			}
		}
		if ref.Optional != nil && *ref.Optional {
			return "", nil
		}
		return "", fmt.Errorf("secret %q key %q not found", ref.Name, ref.Key)
	case from.ResourceFieldRef != nil:
		// limits.cpu and the like: the container's own limit (requests if no limit), "0" if neither.
		name := from.ResourceFieldRef.Resource
		kind, res, _ := strings.Cut(name, ".")
		list := c.Resources.Limits
		if kind == "requests" {
			list = c.Resources.Requests
		}
		if q, ok := list[corev1.ResourceName(res)]; ok {
			return q.String(), nil
		}
		return "0", nil
	}
	return "", fmt.Errorf("unsupported valueFrom")
}

// fieldRef: the downward API paths a kubelet serves.
func fieldRef(fieldPath string, pod *corev1.Pod, podIP, hostIP string) (string, error) {
	if base, key, ok := subscript(fieldPath); ok {
		switch base {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("fieldPath %q does not take a subscript", fieldPath)
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return hostIP, nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", fieldPath)
}

// subscript splits "metadata.labels['key']" into ("metadata.labels", "key").
func subscript(fieldPath string) (string, string, bool) {
	open := strings.Index(fieldPath, "['")
	if open < 0 || !strings.HasSuffix(fieldPath, "']") {
		return "", "", false
	}
	return fieldPath[:open], fieldPath[open+2 : len(fieldPath)-2], true
}

// expand is Kubernetes' $(VAR) expansion (third_party/forked/golang/expansion): $(NAME) of a defined
// variable becomes its value, an undefined one stays as written, $$ is a literal $.
func expand(input string, env map[string]string) string {
	var out strings.Builder
	for i := 0; i < len(input); i++ {
		if input[i] != '$' || i+1 >= len(input) {
			out.WriteByte(input[i])
			continue
		}
		switch input[i+1] {
		case '$':
			out.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(input[i+2:], ')')
			if end < 0 {
				out.WriteString(input[i:])
				return out.String()
			}
			name := input[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				out.WriteString(v)
			} else {
				out.WriteString(input[i : i+3+end])
			}
			i += 2 + end
		default:
			out.WriteByte('$')
		}
	}
	return out.String()
}

// envList is env as KEY=VALUE lines, sorted (os/exec's form).
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

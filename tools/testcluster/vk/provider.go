package main

// The virtual-kubelet provider of one node (nodeutil.Provider): pods bound to the node become podRuns
// (pod.go); their logs (logs.go) and exec (exec.go) are served through the kubelet API. Attach,
// port-forward and stats are not offered.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// placeholderArgv is what an image this node does not know runs: alive until it is killed.
var placeholderArgv = []string{"sleep", "infinity"}

type provider struct {
	machine  *machine
	client   kubernetes.Interface
	node     NodeConfig
	recorder record.EventRecorder
	cfg      nodeutil.ProviderConfig

	mu     sync.Mutex
	pods   map[string]*podRun
	notify func(*corev1.Pod)
}

func newProvider(m *machine, client kubernetes.Interface, n NodeConfig, recorder record.EventRecorder,
	cfg nodeutil.ProviderConfig) *provider {
	return &provider{machine: m, client: client, node: n, recorder: recorder, cfg: cfg, pods: map[string]*podRun{}}
}

func podKey(namespace, name string) string { return namespace + "/" + name }

// NotifyPods makes the provider asynchronous: statuses are pushed as processes start and end.
func (p *provider) NotifyPods(ctx context.Context, notify func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = notify
	p.mu.Unlock()
	go p.reapDeleted(ctx)
}

// reapDeleted makes every deletion a kubelet's. virtual-kubelet calls DeletePod for a pod marked for
// deletion only if the API server's copy says a container is running; a pod deleted before its first
// Running status was written is force-deleted there instead, and its processes would live on until the
// object is gone (or forever, under a finalizer). So the provider looks for its pods that the API server
// has marked for deletion, and deletes them itself (DeletePod is idempotent).
func (p *provider) reapDeleted(ctx context.Context) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p.mu.Lock()
		var marked []*corev1.Pod
		for _, run := range p.pods {
			current, err := p.cfg.Pods.Pods(run.pod.Namespace).Get(run.pod.Name)
			if err == nil && current.UID == run.pod.UID && current.DeletionTimestamp != nil && !run.reaped {
				run.reaped = true
				marked = append(marked, current.DeepCopy())
			}
		}
		p.mu.Unlock()
		for _, pod := range marked {
			go p.reap(ctx, pod)
		}
	}
}

func (p *provider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	key := podKey(pod.Namespace, pod.Name)
	p.mu.Lock()
	locked := true
	defer func() {
		if locked {
			p.mu.Unlock()
		}
	}()
	if _, ok := p.pods[key]; ok {
		return nil
	}
	podIP, own := p.node.Address, false
	if !pod.Spec.HostNetwork {
		addr, err := p.machine.allocate()
		if err != nil {
			return err
		}
		podIP, own = addr, true
	}
	pod.Status.HostIP = p.node.Address
	run, err := p.newRun(pod, podIP)
	if err != nil {
		if own {
			p.machine.release("", podIP, true)
		}
		return err
	}
	run.ownIP = own
	hostname, names := podNames(pod, p.node.Name)
	p.machine.publish(key, podIP, names)
	for _, c := range run.inits {
		c.argv = p.machine.wrap(hostname, c.argv)
	}
	for _, c := range run.mains {
		c.argv = p.machine.wrap(hostname, c.argv)
	}
	p.pods[key] = run
	p.machine.mu.Lock()
	p.machine.runs[key] = run
	p.machine.mu.Unlock()
	p.mu.Unlock() // start publishes the first status, and publishing takes p.mu
	locked = false
	run.start()
	return nil
}

// podNames: the pod's hostname inside its containers (the node's for hostNetwork, as a kubelet does) and
// the names that resolve to its address (<hostname>, <hostname>.<subdomain> and the FQDN).
func podNames(pod *corev1.Pod, nodeName string) (string, []string) {
	if pod.Spec.HostNetwork {
		// The pod shares the node's network and name; its JobSet DNS names still resolve to the node.
		hostname := nodeName
		return hostname, append(dnsNames(pod), nodeName)
	}
	hostname := pod.Spec.Hostname
	if hostname == "" {
		hostname = pod.Name
	}
	return hostname, dnsNames(pod)
}

func dnsNames(pod *corev1.Pod) []string {
	host := pod.Spec.Hostname
	if host == "" {
		host = pod.Name
	}
	if pod.Spec.Subdomain == "" {
		return []string{host}
	}
	short := host + "." + pod.Spec.Subdomain
	// The bare hostname too, as a kubelet's /etc/hosts of the pod lists it: a container resolves its own
	// name (gloo, jax's CPU collectives, finds its interface so); the shared file lists every pod's.
	return []string{short, short + "." + pod.Namespace + ".svc.cluster.local", short + "." + pod.Namespace + ".svc", host}
}

// newRun prepares every container: argv from the image's command source, env as a kubelet makes it.
func (p *provider) newRun(pod *corev1.Pod, podIP string) (*podRun, error) {
	dir := filepath.Join(p.machine.cfg.StateDir, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	run := &podRun{machine: p.machine, key: podKey(pod.Namespace, pod.Name), pod: pod, podIP: podIP, dir: dir,
		done: make(chan struct{})}
	run.notify = func(pod *corev1.Pod) {
		p.mu.Lock()
		notify := p.notify
		p.mu.Unlock()
		if notify != nil {
			notify(p.withOthersConditions(pod))
		}
	}
	for i := range pod.Spec.InitContainers {
		c, err := p.newContainer(&pod.Spec.InitContainers[i], pod, podIP, dir)
		if err != nil {
			return nil, err
		}
		policy := pod.Spec.InitContainers[i].RestartPolicy
		c.sidecar = policy != nil && *policy == corev1.ContainerRestartPolicyAlways
		run.inits = append(run.inits, c)
	}
	for i := range pod.Spec.Containers {
		c, err := p.newContainer(&pod.Spec.Containers[i], pod, podIP, dir)
		if err != nil {
			return nil, err
		}
		run.mains = append(run.mains, c)
	}
	return run, nil
}

func (p *provider) newContainer(spec *corev1.Container, pod *corev1.Pod, podIP, dir string) (*container, error) {
	cfg := p.machine.cfg
	base := map[string]string{
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME": filepath.Join(dir, "home"),
	}
	base["HOSTNAME"], _ = podNames(pod, p.node.Name)
	for k, v := range cfg.Env {
		base[k] = v
	}
	if _, tpu := spec.Resources.Limits["google.com/tpu"]; tpu && p.node.TPU != nil {
		index := pod.Annotations["batch.kubernetes.io/job-completion-index"]
		if index == "" {
			index = "0" // a pod of no Indexed Job: the one worker of its slice
		}
		for _, e := range tpuEnv(p.node.TPU, pod, index) {
			base[e.Name] = e.Value
		}
	}
	if gpus, ok := spec.Resources.Limits["nvidia.com/gpu"]; ok && p.node.GPU != nil {
		for _, e := range gpuEnv(int(gpus.Value())) {
			base[e.Name] = e.Value
		}
	}
	entrypoint := []string(nil)
	workDir := filepath.Join(dir, "work")
	known := trainerImage(spec.Image)
	if known {
		for k, v := range trainerImageEnv(cfg.Repo, base["PYTHONPATH"]) {
			base[k] = v
		}
		// `python` is the project's interpreter: its directory first on PATH, as the image's python is.
		base["PATH"] = filepath.Dir(cfg.Python) + ":" + base["PATH"]
		entrypoint = trainerEntrypoint
	}
	if spec.WorkingDir != "" {
		workDir = filepath.Join(dir, "root", spec.WorkingDir) // the container's own filesystem is not here
	}
	env, err := resolveEnv(spec, pod, podIP, p.node.Address, base, p.cfg.ConfigMaps, p.cfg.Secrets)
	if err != nil {
		return nil, err
	}
	var argv []string
	if known {
		// A kubelet's rule: command replaces the entrypoint, args replace the image's CMD; $(VAR) expanded.
		command := entrypoint
		if len(spec.Command) > 0 {
			command = spec.Command
		}
		for _, a := range append(append([]string{}, command...), spec.Args...) {
			argv = append(argv, expand(a, env))
		}
	} else {
		argv = placeholderArgv
		p.recorder.Eventf(pod, corev1.EventTypeNormal, "Placeholder",
			"container %s: image %s is not known to this node (testcluster process pool); it runs as a "+
				"placeholder that stays alive until it is killed", spec.Name, spec.Image)
	}
	if err := os.MkdirAll(env["HOME"], 0o755); err != nil {
		return nil, err
	}
	return &container{spec: *spec, argv: argv, env: envList(env), dir: workDir,
		logPath: filepath.Join(dir, spec.Name+".log"), finished: make(chan struct{})}, nil
}

// kubeletConditions are the pod conditions a kubelet owns; the rest (DisruptionTarget, set by an eviction or
// a preemption, and any other writer's) are kept as the API server has them, since virtual-kubelet writes
// the provider's status whole.
var kubeletConditions = map[corev1.PodConditionType]bool{corev1.PodScheduled: true, corev1.PodInitialized: true,
	corev1.ContainersReady: true, corev1.PodReady: true, corev1.PodReadyToStartContainers: true}

// withOthersConditions is pod with the others' conditions of the informer's copy (which may lag the API
// server: removeStopped, which must not lose an eviction's DisruptionTarget, merges from a fresh read).
func (p *provider) withOthersConditions(pod *corev1.Pod) *corev1.Pod {
	current, err := p.cfg.Pods.Pods(pod.Namespace).Get(pod.Name)
	if err != nil || current.UID != pod.UID {
		return pod
	}
	return withConditionsOf(pod, current.Status.Conditions)
}

// withConditionsOf is pod with those of `conditions` that no kubelet owns.
func withConditionsOf(pod *corev1.Pod, conditions []corev1.PodCondition) *corev1.Pod {
	for _, c := range conditions {
		if !kubeletConditions[c.Type] {
			pod.Status.Conditions = append(pod.Status.Conditions, c)
		}
	}
	return pod
}

// reap deletes a pod marked for deletion and writes its terminal status itself: virtual-kubelet, having
// force-deleted the pod, drops the provider's later statuses of it (seen: a conflict, then nothing), and a
// kubelet always reports how the containers ended while the object is still there (a finalizer holds it).
func (p *provider) reap(ctx context.Context, marked *corev1.Pod) {
	p.mu.Lock()
	run := p.pods[podKey(marked.Namespace, marked.Name)]
	p.mu.Unlock()
	if run != nil {
		_ = p.DeletePod(ctx, marked)
	}
}

// removeStopped is a kubelet's status manager once a deleted pod's containers have all stopped: it writes
// the pod's terminal status (the Job controller's podFailurePolicy reads its exit codes), then deletes
// the object at once (grace period 0, this pod's UID only). virtual-kubelet itself would remove the object
// only a whole grace period after DeletePod returned, although the processes are gone: every JobSet
// restart that deleted a running pod waited those 30 s more for the old Jobs to go.
func (p *provider) removeStopped(ctx context.Context, deleted *corev1.Pod, final *corev1.Pod) {
	pods := p.client.CoreV1().Pods(deleted.Namespace)
	for attempt := 0; attempt < 5; attempt++ {
		current, err := pods.Get(ctx, deleted.Name, metav1.GetOptions{})
		if err != nil || current.UID != deleted.UID || current.DeletionTimestamp == nil {
			return // gone, replaced, or not being deleted (a pod of this node found on no API server)
		}
		if current.Status.Phase != corev1.PodFailed && current.Status.Phase != corev1.PodSucceeded {
			// The others' conditions as this read has them: the informer's copy may not have an eviction's
			// DisruptionTarget yet (the Job controller's podFailurePolicy reads it), and this write is the last.
			others := current.Status.Conditions
			current.Status = *final.Status.DeepCopy()
			current.Status.Conditions = withConditionsOf(final.DeepCopy(), others).Status.Conditions
			if _, err = pods.UpdateStatus(ctx, current, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
				continue
			} else if err != nil {
				return
			}
		}
		zero := int64(0)
		uid := deleted.UID
		_ = pods.Delete(ctx, deleted.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
			Preconditions: &metav1.Preconditions{UID: &uid}})
		return
	}
}

func (p *provider) UpdatePod(context.Context, *corev1.Pod) error {
	return nil // nothing of a running pod that a container on this node would see can change
}

// DeletePod is a kubelet's deletion: SIGTERM, the pod's grace period, SIGKILL; once every process has
// exited, the terminal status is written and the object removed (removeStopped).
func (p *provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	key := podKey(pod.Namespace, pod.Name)
	p.mu.Lock()
	run, ok := p.pods[key]
	p.mu.Unlock()
	if !ok {
		return errdefs.NotFoundf("pod %s is not on this node", key)
	}
	grace := pod.DeletionGracePeriodSeconds
	if current, err := p.cfg.Pods.Pods(pod.Namespace).Get(pod.Name); err != nil || current.UID != pod.UID {
		// Gone from the API server already: a force deletion (grace period 0), which removes the object at
		// once; the copy handed here may still carry the spec's grace period. A kubelet kills such a pod's
		// containers after its minimum grace period, not the spec's.
		zero := int64(0)
		grace = &zero
	}
	if grace != nil {
		run.mu.Lock()
		run.pod.DeletionGracePeriodSeconds = grace
		run.mu.Unlock()
	}
	run.kill(run.gracePeriod())
	p.mu.Lock()
	mine := p.pods[key] == run // a second DeletePod of the same pod finds it gone: one release only
	if mine {
		delete(p.pods, key)
	}
	p.mu.Unlock()
	if mine {
		p.machine.release(key, run.podIP, run.ownIP)
		p.removeStopped(ctx, pod, run.snapshot())
	}
	return nil
}

func (p *provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	run, ok := p.pods[podKey(namespace, name)]
	p.mu.Unlock()
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, name)
	}
	return run.snapshot(), nil
}

func (p *provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

func (p *provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	runs := make([]*podRun, 0, len(p.pods))
	for _, r := range p.pods {
		runs = append(runs, r)
	}
	p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(runs))
	for _, r := range runs {
		out = append(out, r.snapshot())
	}
	return out, nil
}

// container is one container of a pod on this node (the kubelet API names it so: logs, exec).
func (p *provider) container(namespace, podName, containerName string) (*podRun, *container, error) {
	p.mu.Lock()
	run, ok := p.pods[podKey(namespace, podName)]
	p.mu.Unlock()
	if !ok {
		return nil, nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, podName)
	}
	for _, each := range append(append([]*container{}, run.inits...), run.mains...) {
		if each.spec.Name == containerName {
			return run, each, nil
		}
	}
	return nil, nil, errdefs.NotFoundf("container %s is not in pod %s/%s", containerName, namespace, podName)
}

func (p *provider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errdefs.InvalidInput("attach is not offered by the testcluster process pool")
}

func (p *provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return &statsv1alpha1.Summary{}, nil
}

func (p *provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, nil
}

func (p *provider) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return errdefs.InvalidInput("port-forward is not offered by the testcluster process pool")
}

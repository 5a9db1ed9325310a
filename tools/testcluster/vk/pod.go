package main

// One pod's containers as processes: init containers in order (a native sidecar, an init container with
// restartPolicy Always, is started and left running), then every main container at once; the pod's
// status as a kubelet writes it; deletion as a kubelet does it (SIGTERM, the grace period, SIGKILL).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type container struct {
	spec    corev1.Container
	sidecar bool
	argv    []string
	env     []string
	dir     string
	logPath string

	proc     *os.Process
	state    corev1.ContainerState
	finished chan struct{} // closed once the process has exited and state is Terminated
}

type podRun struct {
	machine *machine
	key     string
	pod     *corev1.Pod // the pod as created; status below is ours
	podIP   string
	ownIP   bool // podIP was allocated for this pod (not the node's, for hostNetwork)
	dir     string
	notify  func(*corev1.Pod)
	reaped  bool // provider.reapDeleted has seen it marked for deletion (under provider.mu)

	publishMu sync.Mutex // orders publishes (publish)
	mu        sync.Mutex
	status    corev1.PodStatus
	inits     []*container
	mains     []*container
	deleting  bool          // set once; no container starts after it
	done      chan struct{} // closed once every process has exited and the final status is set
}

// start runs the pod's containers in the background; notify is called with each new status.
func (r *podRun) start() {
	now := metav1.Now()
	r.mu.Lock()
	r.status = corev1.PodStatus{Phase: corev1.PodPending, HostIP: r.pod.Status.HostIP, PodIP: r.podIP,
		HostIPs: []corev1.HostIP{{IP: r.pod.Status.HostIP}}, PodIPs: []corev1.PodIP{{IP: r.podIP}},
		StartTime: &now, QOSClass: r.pod.Status.QOSClass,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: initialized(len(r.inits) == 0), LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}}}
	for _, c := range append(append([]*container{}, r.inits...), r.mains...) {
		c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	}
	r.mu.Unlock()
	r.publish()
	go r.run()
}

func initialized(yes bool) corev1.ConditionStatus {
	if yes {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

func (r *podRun) run() {
	defer close(r.done)
	ok := true
	for _, c := range r.inits {
		if !r.launch(c) {
			ok = false
			break
		}
		if c.sidecar {
			continue // a native sidecar keeps running beside the rest
		}
		<-c.finished
		if c.state.Terminated.ExitCode != 0 {
			ok = false // restartPolicy Never: a failed init container fails the pod
			break
		}
	}
	if ok {
		r.setCondition(corev1.PodInitialized, corev1.ConditionTrue)
		r.mu.Lock()
		r.status.Phase = corev1.PodRunning
		r.mu.Unlock()
		for _, c := range r.mains {
			r.launch(c)
		}
		r.setCondition(corev1.ContainersReady, corev1.ConditionTrue)
		r.setCondition(corev1.PodReady, corev1.ConditionTrue)
		for _, c := range r.mains {
			if c.proc != nil {
				<-c.finished
			}
		}
	}
	// The main containers are done (or never started): sidecars are stopped, as a kubelet stops them.
	grace := r.gracePeriod()
	for _, c := range r.inits {
		if c.sidecar && c.proc != nil {
			stop(c, grace)
		}
	}
	r.mu.Lock()
	r.status.Phase = phase(r.mains, ok)
	for _, t := range []corev1.PodConditionType{corev1.ContainersReady, corev1.PodReady} {
		setCondition(&r.status, t, corev1.ConditionFalse)
	}
	r.mu.Unlock()
	r.publish()
}

// phase for restartPolicy Never: Succeeded when every main container exited 0, else Failed.
func phase(mains []*container, initOK bool) corev1.PodPhase {
	if !initOK {
		return corev1.PodFailed
	}
	for _, c := range mains {
		if c.state.Terminated == nil || c.state.Terminated.ExitCode != 0 {
			return corev1.PodFailed
		}
	}
	return corev1.PodSucceeded
}

// launch starts one container's process (its own process group) and a goroutine that waits for it;
// false when the pod is being deleted (the container is left Waiting, as a kubelet leaves it).
func (r *podRun) launch(c *container) bool {
	startedAt := metav1.Now()
	r.mu.Lock()
	defer r.publish()
	defer r.mu.Unlock()
	if r.deleting {
		return false
	}
	log, err := os.OpenFile(c.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err == nil {
		err = os.MkdirAll(c.dir, 0o755)
	}
	var cmd *exec.Cmd
	if err == nil {
		cmd, err = command(c)
	}
	if err == nil {
		cmd.Stdout, cmd.Stderr = log, log // one file, both streams in the order they were written
		// Its own process group (what SIGKILL ends), killed with this process if it dies first, and its
		// own namespaces (init.go).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL,
			Cloneflags: r.machine.namespaces()}
		err = startContainer(cmd, r.machine.sandbox)
	}
	if err != nil {
		// What a kubelet reports when the runtime cannot start the container.
		msg := err.Error()
		if log != nil {
			fmt.Fprintf(log, "testcluster-vk: cannot start container %s: %s\n", c.spec.Name, msg)
			log.Close()
		}
		c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 128,
			Reason: "StartError", Message: msg, StartedAt: startedAt, FinishedAt: metav1.Now()}}
		close(c.finished)
		return true
	}
	c.proc = cmd.Process
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: startedAt}}
	go func() {
		err := cmd.Wait()
		log.Close()
		code, reason := exitOf(cmd.ProcessState, err)
		r.mu.Lock()
		c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code,
			Reason: reason, StartedAt: startedAt, FinishedAt: metav1.Now(),
			ContainerID: containerID(c)}}
		r.mu.Unlock()
		close(c.finished)
		r.publish()
	}()
	return true
}

// command: argv looked up in the container's own PATH (a container's PATH, not this process's).
func command(c *container) (*exec.Cmd, error) {
	if len(c.argv) == 0 {
		return nil, fmt.Errorf("no command")
	}
	path := c.argv[0]
	if !strings.Contains(path, "/") {
		found, err := lookPath(path, c.env)
		if err != nil {
			return nil, err
		}
		path = found
	}
	cmd := &exec.Cmd{Path: path, Args: c.argv, Env: c.env, Dir: c.dir}
	return cmd, nil
}

func lookPath(name string, env []string) (string, error) {
	pathVar := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	for _, dir := range filepath.SplitList(pathVar) {
		candidate := filepath.Join(dir, name)
		if info, err := os.Stat(candidate); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
}

// exitOf: the exit code a container runtime reports (128+signal for a killed process) and the kubelet's
// reason for it.
func exitOf(state *os.ProcessState, err error) (int32, string) {
	if state == nil {
		return 128, "Error"
	}
	code := int32(state.ExitCode())
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int32(ws.Signal())
	}
	if code == 0 {
		return 0, "Completed"
	}
	return code, "Error"
}

func containerID(c *container) string {
	if c.proc == nil {
		return ""
	}
	return fmt.Sprintf("process://%d", c.proc.Pid)
}

// kill is a kubelet's deletion: SIGTERM to each running container's process, SIGKILL to its whole
// process group once the grace period is over; returns when every process has exited.
func (r *podRun) kill(grace time.Duration) {
	r.mu.Lock()
	r.deleting = true
	var started []*container
	for _, c := range append(append([]*container{}, r.mains...), r.inits...) {
		if c.proc != nil {
			started = append(started, c)
		}
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range started {
		wg.Add(1)
		go func() { defer wg.Done(); stop(c, grace) }()
	}
	wg.Wait()
	<-r.done
}

// stop: SIGTERM to the container's main process (a container runtime signals PID 1 only), then after
// `grace` SIGKILL to its process group (a runtime kills every process of the container).
func stop(c *container, grace time.Duration) {
	select {
	case <-c.finished:
		return
	default:
	}
	_ = c.proc.Signal(syscall.SIGTERM)
	select {
	case <-c.finished:
	case <-time.After(grace):
	}
	_ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL)
	<-c.finished
}

func (r *podRun) gracePeriod() time.Duration {
	seconds := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if r.pod.DeletionGracePeriodSeconds != nil {
		seconds = *r.pod.DeletionGracePeriodSeconds
	} else if r.pod.Spec.TerminationGracePeriodSeconds != nil {
		seconds = *r.pod.Spec.TerminationGracePeriodSeconds
	}
	// kuberuntime's minimumGracePeriodInSeconds: a kubelet gives even a force-deleted pod 2 s after SIGTERM.
	if seconds < minimumGracePeriodSeconds {
		seconds = minimumGracePeriodSeconds
	}
	return time.Duration(seconds) * time.Second
}

const minimumGracePeriodSeconds = 2

func (r *podRun) setCondition(t corev1.PodConditionType, s corev1.ConditionStatus) {
	r.mu.Lock()
	setCondition(&r.status, t, s)
	r.mu.Unlock()
	r.publish()
}

func setCondition(status *corev1.PodStatus, t corev1.PodConditionType, s corev1.ConditionStatus) {
	for i := range status.Conditions {
		if status.Conditions[i].Type == t && status.Conditions[i].Status != s {
			status.Conditions[i].Status = s
			status.Conditions[i].LastTransitionTime = metav1.Now()
		}
	}
}

// snapshot is the pod with the status as it stands.
func (r *podRun) snapshot() *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	pod := r.pod.DeepCopy()
	pod.Status = *r.status.DeepCopy()
	pod.Status.InitContainerStatuses = statuses(r.inits)
	pod.Status.ContainerStatuses = statuses(r.mains)
	return pod
}

func statuses(cs []*container) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, 0, len(cs))
	for _, c := range cs {
		running := c.state.Running != nil
		started := running
		out = append(out, corev1.ContainerStatus{Name: c.spec.Name, Image: c.spec.Image, ImageID: c.spec.Image,
			State: *c.state.DeepCopy(), Ready: running, Started: &started, ContainerID: containerID(c)})
	}
	return out
}

// publish pushes the status as it stands. Containers end on goroutines of their own, so two publishes can
// race: the snapshot is taken and pushed under publishMu, so that a later status is never overwritten by an
// earlier one (virtual-kubelet writes the last one it was given).
func (r *podRun) publish() {
	r.publishMu.Lock()
	defer r.publishMu.Unlock()
	if r.notify != nil {
		r.notify(r.snapshot())
	}
}

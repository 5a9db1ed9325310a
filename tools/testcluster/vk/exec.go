package main

// The kubelet exec API of a process-pool node (`kubectl exec`, `elxpk workload kill-slice --mode exit`):
// the command runs in the container's namespaces (init.go: its PID 1, /etc/hosts and hostname) with the
// container's env and working dir; stdin, stdout and stderr stream through the API server, and the exit
// code comes back as a runtime reports it (128+N for signal N).

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	utilexec "k8s.io/utils/exec"
)

// execOutputWait bounds how long an exec waits for its output to drain once the command has exited (a
// background process of it may hold the pipe open), as a runtime's exec ends with its process.
const execOutputWait = 2 * time.Second

// RunInContainer runs cmd in the container as `nsenter` into its init's namespaces: `kill 1` there is the
// container's init (init.go), which hands the signal to the container's process.
func (p *provider) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string,
	attach api.AttachIO) error {
	if !p.machine.sandbox {
		// Without a PID namespace, PID 1 would be this machine's init.
		return errdefs.InvalidInput("exec needs the process pool's namespaces (root: testcluster-vk said so on start)")
	}
	if attach.TTY() {
		return errdefs.InvalidInput("exec with a terminal (-t) is not offered by the testcluster process pool")
	}
	if len(cmd) == 0 {
		return errdefs.InvalidInput("exec: no command")
	}
	pod, c, err := p.container(namespace, podName, containerName)
	if err != nil {
		return err
	}
	pod.mu.Lock()
	running := c.proc != nil && c.state.Running != nil
	pid := 0
	if running {
		pid = c.proc.Pid
	}
	pod.mu.Unlock()
	if !running {
		return errdefs.InvalidInputf("container %s of pod %s/%s is not running", containerName, namespace, podName)
	}
	args := append([]string{"--target", strconv.Itoa(pid), "--mount", "--uts", "--pid", "--wd=" + c.dir, "--"}, cmd...)
	run := exec.CommandContext(ctx, "nsenter", args...)
	run.Env = c.env // nsenter looks the command up in the container's PATH
	if in := attach.Stdin(); in != nil {
		run.Stdin = in
	}
	if out := attach.Stdout(); out != nil {
		run.Stdout = out
	}
	if out := attach.Stderr(); out != nil {
		run.Stderr = out
	}
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The client went away: the whole exec goes (nsenter and the command it forked share the group).
	run.Cancel = func() error { return syscall.Kill(-run.Process.Pid, syscall.SIGKILL) }
	run.WaitDelay = execOutputWait
	err = run.Run()
	var exited *exec.ExitError
	if errors.As(err, &exited) {
		code, _ := exitOf(exited.ProcessState, err)
		return utilexec.CodeExitError{Err: err, Code: int(code)}
	}
	return err
}

package main

// A container's PID 1: `testcluster-vk container-init HOSTS HOSTNAME -- ARGV...`, started by the provider in
// new PID, mount and UTS namespaces (pod.go: launch; root only, machine.go: sandbox).
//
// Why a PID namespace: exec (exec.go) runs in the container's namespaces, and what a user runs there, such
// as `kill -TERM 1` (`kill-slice --mode exit`), must reach the container's process, never this machine's
// init. Why an init of our own rather than the container's process as PID 1: the kernel drops every
// signal to a namespace's PID 1 that it has no handler for, so `sleep` or a shell there would ignore the
// SIGTERM of a deletion and hold the pod for its whole grace period. This init forwards every signal to
// the container's process, which so sees them as it did before the namespace (and as under `docker run
// --init`), reaps the orphans, and exits with the process's code (128+N for signal N, as a runtime reports it).

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

const containerInitArg = "container-init"

// initArgv is the argv the provider starts for a container whose own argv is `argv`.
func initArgv(hostsPath, hostname string, argv []string) []string {
	// /proc/self/exe: this binary even after a rebuild has replaced its file (`testcluster build`).
	return append([]string{"/proc/self/exe", containerInitArg, hostsPath, hostname, "--"}, argv...)
}

// initReadyFd is the pipe on which the init says that it handles signals (startContainer).
const initReadyFd = 3

// initReadyWait bounds the wait for that word (an init that never says it is killed with its container).
const initReadyWait = 30 * time.Second

// startContainer starts cmd (an initArgv when `sandbox`) and returns once its init handles signals: before
// that, the Go runtime's own handler would end it on a deletion's SIGTERM with exit code 2 (a namespace's
// PID 1 cannot die of the signal itself). The caller holds the pod's lock, so no stop() signals it sooner.
func startContainer(cmd *exec.Cmd, sandbox bool) error {
	if !sandbox {
		return cmd.Start()
	}
	ready, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer ready.Close()
	cmd.ExtraFiles = []*os.File{w} // initReadyFd
	err = cmd.Start()
	w.Close()
	if err != nil {
		return err
	}
	_ = ready.SetReadDeadline(time.Now().Add(initReadyWait))
	_, _ = ready.Read(make([]byte, 1)) // a byte, or EOF: the init has exited (its status says how)
	return nil
}

// containerInit is PID 1 of one container; its return is the container's exit code.
func containerInit(args []string) int {
	if len(args) < 4 || args[2] != "--" {
		fmt.Fprintln(os.Stderr, "usage: testcluster-vk container-init HOSTS HOSTNAME -- ARGV...")
		return 126
	}
	hostsPath, hostname, argv := args[0], args[1], args[3:]
	if err := isolate(hostsPath, hostname); err != nil {
		fmt.Fprintln(os.Stderr, "testcluster-vk container-init:", err)
		return 126
	}
	path, err := exec.LookPath(argv[0]) // the container's PATH: this process was given the container's env
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster-vk: %s: not found\n", argv[0]) // what a shell says, and its 127
		return 127
	}
	signals := make(chan os.Signal, 64)
	signal.Notify(signals) // before the start: no SIGCHLD is missed
	if ready := os.NewFile(initReadyFd, "ready"); ready != nil {
		_, _ = ready.Write([]byte{1}) // signals are this init's now (startContainer); not the container's fd
		ready.Close()
	}
	child, err := os.StartProcess(path, argv, &os.ProcAttr{Env: os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster-vk: cannot start %s: %v\n", argv[0], err)
		return 126
	}
	for sig := range signals {
		switch sig {
		case syscall.SIGCHLD:
			if code, done := reap(child.Pid); done {
				return code
			}
		case syscall.SIGURG: // the Go runtime's own preemption signal, not a sender's
		default:
			_ = child.Signal(sig)
		}
	}
	return 126
}

// isolate makes this process's new namespaces a container's: mounts private, the machine's hosts file on
// /etc/hosts (machine.go), the pod's hostname, and a /proc of this PID namespace (`ps`, /proc/1).
func isolate(hostsPath, hostname string) error {
	// A new mount namespace still propagates its mounts to the machine's while / is shared.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if err := syscall.Mount(hostsPath, "/etc/hosts", "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s on /etc/hosts: %w", hostsPath, err)
	}
	if err := syscall.Sethostname([]byte(hostname)); err != nil {
		return fmt.Errorf("setting the hostname %s: %w", hostname, err)
	}
	flags := uintptr(syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC)
	if err := syscall.Mount("proc", "/proc", "proc", flags, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	return nil
}

// reap collects every exited child (orphans are this init's); done with the container's code once `main`
// has exited.
func reap(main int) (int, bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return 0, false
		}
		if pid != main {
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal()), true
		}
		return ws.ExitStatus(), true
	}
}

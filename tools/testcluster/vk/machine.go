package main

// The machine every node of this process shares: the pods' loopback addresses and the hosts file through
// which their hostnames resolve.
//
// Name resolution: a kubelet gives each container an /etc/hosts of its own and the cluster DNS answers for
// <hostname>.<subdomain>. Here one hosts file (<state dir>/hosts) lists every running pod (and every node)
// of this machine, and each container runs in PID, mount and UTS namespaces of its own (init.go, root
// only) where that file is bind-mounted on /etc/hosts and the hostname is the pod's; so getaddrinfo in any
// language (glibc, gRPC's native resolver) resolves the names a JobSet gives its pods, and exec (exec.go)
// runs in the container's namespaces. Without the right to create namespaces (not root) containers run
// without them: the names do not resolve and exec is refused.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
)

type machine struct {
	cfg       Config
	hostsPath string
	sandbox   bool // new PID, mount and UTS namespaces can be made here (init.go)

	mu    sync.Mutex
	used  map[string]bool              // pod addresses in use
	names map[string]map[string]string // pod key -> address -> names
	runs  map[string]*podRun           // every pod of every node, by key
}

func newMachine(cfg Config) (*machine, error) {
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, err
	}
	m := &machine{cfg: cfg, hostsPath: filepath.Join(cfg.StateDir, "hosts"), used: map[string]bool{},
		names: map[string]map[string]string{}, runs: map[string]*podRun{}}
	for _, n := range cfg.Nodes {
		m.names["node/"+n.Name] = map[string]string{n.Address: n.Name}
	}
	if err := m.writeHosts(); err != nil {
		return nil, err
	}
	m.sandbox = exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--mount", "--uts", "--propagation",
		"private", "--", "true").Run() == nil
	if !m.sandbox {
		fmt.Fprintln(os.Stderr, "testcluster-vk: `unshare --pid --mount --uts` is not allowed here (not root?): "+
			"containers run without their own /etc/hosts, hostname and PID 1; pod hostnames will not resolve, "+
			"and exec is refused")
	}
	return m, nil
}

// allocate gives a pod not on hostNetwork an address of its own.
func (m *machine) allocate() (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := 1; i < 255; i++ {
		addr := fmt.Sprintf("%s.%d", m.cfg.PodAddressPrefix, i)
		if !m.used[addr] {
			m.used[addr] = true
			return addr, nil
		}
	}
	return "", fmt.Errorf("no free pod address in %s.0/24", m.cfg.PodAddressPrefix)
}

// publish adds the pod's names for its address to the hosts file (what the headless Service's DNS
// records would answer: JobSet publishes not-ready addresses, so from the start).
func (m *machine) publish(key, address string, names []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.names[key] = map[string]string{address: strings.Join(names, " ")}
	if err := m.writeHosts(); err != nil {
		fmt.Fprintln(os.Stderr, "testcluster-vk: hosts file:", err)
	}
}

// release takes the pod's names out and frees its address (unless it was the node's).
func (m *machine) release(key, address string, own bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.names, key)
	delete(m.runs, key)
	if own {
		delete(m.used, address)
	}
	if err := m.writeHosts(); err != nil {
		fmt.Fprintln(os.Stderr, "testcluster-vk: hosts file:", err)
	}
}

// writeHosts rewrites the hosts file in place, in one write: containers have it bind-mounted, and a bind
// mount holds the inode, so a new file renamed over it would not be seen.
func (m *machine) writeHosts() error {
	lines := []string{}
	for _, byAddress := range m.names {
		for address, names := range byAddress {
			lines = append(lines, address+"\t"+names)
		}
	}
	sort.Strings(lines)
	text := "# written by testcluster-vk: the pods and nodes of this machine\n127.0.0.1\tlocalhost\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" + strings.Join(lines, "\n") + "\n"
	f, err := os.OpenFile(m.hostsPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// wrap is the argv that runs `argv` as a container (init.go: its own PID 1, /etc/hosts and hostname);
// launch (pod.go) gives it the namespaces.
func (m *machine) wrap(hostname string, argv []string) []string {
	if !m.sandbox {
		return argv
	}
	return initArgv(m.hostsPath, hostname, argv)
}

// namespaces are the clone flags of a container's process (init.go), none without the sandbox.
func (m *machine) namespaces() uintptr {
	if !m.sandbox {
		return 0
	}
	return syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS
}

func (m *machine) stopAll() {
	m.mu.Lock()
	runs := make([]*podRun, 0, len(m.runs))
	for _, r := range m.runs {
		runs = append(runs, r)
	}
	m.mu.Unlock()
	for _, r := range runs {
		r.kill(0)
	}
}

// Command testcluster-vk registers the "process pool" nodes of tools/testcluster with upstream
// virtual-kubelet (github.com/virtual-kubelet/virtual-kubelet, node/nodeutil) and runs the containers of
// the pods bound to them as processes on this machine (provider.go).
//
// One process serves every node of the config file: each node is a nodeutil.Node of its own (its own pod
// controller, node lease and kubelet API listener on the node's own loopback address), sharing one
// provider state (the hosts file, the pod addresses).
//
//	testcluster-vk --kubeconfig KUBECONFIG --config vk-nodes.json
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	vkslog "github.com/virtual-kubelet/virtual-kubelet/log/slog"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
)

// Config is what `testcluster up` writes (cluster_up.py: process_pool_config).
type Config struct {
	Nodes []NodeConfig `json:"nodes"`
	// The kubelet API port every node listens on, each on its own address.
	Port    int    `json:"port"`
	TLSCert string `json:"tlsCert"`
	TLSKey  string `json:"tlsKey"`
	// The project checkout and the Python interpreter an elxpk-trainer image runs with.
	Repo   string `json:"repo"`
	Python string `json:"python"`
	// Where pods' work dirs, logs and the shared hosts file go.
	StateDir string `json:"stateDir"`
	// Addresses for pods that are not on hostNetwork: PodAddressPrefix + ".1" to ".254".
	PodAddressPrefix string `json:"podAddressPrefix"`
	// Env every container gets from this "machine" (what GKE's metadata server and workload identity stand
	// for here: STORAGE_EMULATOR_HOST and the like), before the pod's own env.
	Env map[string]string `json:"env"`
}

// NodeConfig is one node: the labels, taints and capacity of its kwok twin, and its own loopback address.
type NodeConfig struct {
	Name     string            `json:"name"`
	Address  string            `json:"address"`
	Labels   map[string]string `json:"labels"`
	Taints   []corev1.Taint    `json:"taints"`
	Capacity map[string]string `json:"capacity"`
	TPU      *TPUHost          `json:"tpu,omitempty"`
	GPU      *GPUHost          `json:"gpu,omitempty"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == containerInitArg { // a container's PID 1 (init.go)
		os.Exit(containerInit(os.Args[2:]))
	}
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	configPath := flag.String("config", "", "the node config `up` writes (JSON)")
	flag.Parse()
	if err := run(*kubeconfig, *configPath); err != nil {
		fmt.Fprintln(os.Stderr, "testcluster-vk:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, configPath string) error {
	data, err := os.ReadFile(configPath)
	if err != nil {
		return err
	}
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("%s: %w", configPath, err)
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	restConfig.QPS, restConfig.Burst = 100, 200
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	// virtual-kubelet logs nothing unless given a logger: its warnings and errors (debug with
	// TESTCLUSTER_VK_DEBUG=1) go to stderr, which `up` keeps in <run dir>/logs/.
	level := slog.LevelInfo
	if os.Getenv("TESTCLUSTER_VK_DEBUG") != "" {
		level = slog.LevelDebug
	}
	log.L = vkslog.FromSlog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))

	// One event broadcaster for every node: nodeutil starts its own only when given no recorder, and the
	// provider needs the recorder too (the placeholder Event).
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()

	machine, err := newMachine(cfg)
	if err != nil {
		return err
	}
	defer machine.stopAll()
	var nodes []*nodeutil.Node
	for _, nc := range cfg.Nodes {
		nc := nc
		recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: nc.Name})
		mux := http.NewServeMux()
		n, err := nodeutil.NewNode(nc.Name,
			func(pc nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
				return newProvider(machine, client, nc, recorder, pc), nil, nil
			},
			nodeutil.WithClient(client),
			func(c *nodeutil.NodeConfig) error {
				c.NodeSpec = nodeSpec(nc, cfg.Port, machine.sandbox)
				c.HTTPListenAddr = net.JoinHostPort(nc.Address, strconv.Itoa(cfg.Port))
				c.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
				c.Handler = mux
				c.EventRecorder = recorder
				// The kubelet resolves fieldRefs with the pod's own address (status.podIP), which
				// virtual-kubelet's resolver refuses; the provider resolves the env itself (env.go).
				c.SkipDownwardAPIResolution = true
				c.NumWorkers = 4
				return nil
			},
			nodeutil.AttachProviderRoutes(mux),
		)
		if err != nil {
			return fmt.Errorf("node %s: %w", nc.Name, err)
		}
		nodes = append(nodes, n)
		go func() {
			if err := n.Run(ctx); err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "testcluster-vk: node %s stopped: %v\n", nc.Name, err)
				cancel()
			}
		}()
	}
	for i, n := range nodes {
		if err := n.WaitReady(ctx, 0); err != nil {
			return fmt.Errorf("node %s not ready: %w", cfg.Nodes[i].Name, err)
		}
	}
	fmt.Fprintf(os.Stderr, "testcluster-vk: %d nodes ready\n", len(nodes))
	<-ctx.Done()
	return nil
}

// ExecAnnotation marks a node that serves exec (exec.go: only with the namespaces, machine.go), so that a
// test can tell before it relies on it (tools/testcluster/kubeapi.py: serves_exec).
const ExecAnnotation = "testcluster.elxpk.dev/exec"

// nodeSpec is the Node object: its kwok twin's labels, taints and capacity, this node's address (the
// API server reaches the kubelet API at InternalIP:port), the kubelet's version, and whether it serves exec.
func nodeSpec(nc NodeConfig, port int, servesExec bool) corev1.Node {
	capacity := corev1.ResourceList{}
	for name, value := range nc.Capacity {
		capacity[corev1.ResourceName(name)] = resource.MustParse(value)
	}
	labels := map[string]string{}
	for k, v := range nc.Labels {
		labels[k] = v
	}
	annotations := map[string]string{ExecAnnotation: strconv.FormatBool(servesExec)}
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nc.Name, Labels: labels, Annotations: annotations},
		Spec:       corev1.NodeSpec{Taints: nc.Taints},
		Status: corev1.NodeStatus{
			Phase:       corev1.NodePending,
			Capacity:    capacity,
			Allocatable: capacity,
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nc.Address},
				{Type: corev1.NodeHostName, Address: nc.Name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
			NodeInfo: corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "amd64",
				KubeletVersion: "v1.34.4-virtual-kubelet-v1.14.1"},
			// Ready turns True when the node controller is up (nodeutil's readyCb); the rest stay False.
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse}},
		},
	}
}

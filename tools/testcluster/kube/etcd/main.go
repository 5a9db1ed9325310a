// Command etcd is upstream's etcd server (go.etcd.io/etcd/server/v3/etcdmain) at the version
// k8s.io/kubernetes requires; it exists only so that this module can build it with `go build`.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }

// Command etcd is upstream's etcd server, built from its Go module: etcd's
// server module carries replace directives, so `go install` cannot build it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }

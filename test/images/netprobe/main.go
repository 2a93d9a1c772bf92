// Command netprobe checks, from inside a pod of the real node, what the pod can reach: each argument
// host:port is resolved and dialled over TCP, with retries until -timeout; it prints one line per address
// and exits 1 if one stayed unreachable.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	timeout := flag.Duration("timeout", 30*time.Second, "how long to retry each address")
	flag.Parse()
	failed := false
	for _, addr := range flag.Args() {
		deadline := time.Now().Add(*timeout)
		for {
			conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err == nil {
				fmt.Printf("reached %s (%s)\n", addr, conn.RemoteAddr())
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				fmt.Printf("unreachable %s: %v\n", addr, err)
				failed = true
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if failed {
		os.Exit(1)
	}
}

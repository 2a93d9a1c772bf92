package stack

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// service stands in for the operator's webhook Service when more than one replica runs: it accepts on a
// loopback port and forwards each connection to one of the ready replicas, starting from the next one each
// time, as kube-proxy spreads connections over a Service's ready endpoints. A replica that dies is left out
// as soon as it refuses, as its endpoint is once the kubelet sees it gone.
type service struct {
	listener  net.Listener
	endpoints func(context.Context) []string
	next      atomic.Uint32
}

// endpointCheckTimeout bounds the readiness checks made to choose a replica for one connection.
const endpointCheckTimeout = 2 * time.Second

func startService(endpoints func(context.Context) []string) (*service, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &service{listener: l, endpoints: endpoints}
	go s.serve()
	return s, nil
}

func (s *service) port() int { return s.listener.Addr().(*net.TCPAddr).Port }

func (s *service) serve() {
	for {
		in, err := s.listener.Accept()
		if err != nil {
			return // closed
		}
		go s.forward(in)
	}
}

// forward joins in to the first ready replica that accepts, in turn from the next one; with none, in is
// closed, as a connection to a Service without endpoints is refused.
func (s *service) forward(in net.Conn) {
	defer in.Close()
	ctx, cancel := context.WithTimeout(context.Background(), endpointCheckTimeout)
	addrs := s.endpoints(ctx)
	cancel()
	if len(addrs) == 0 {
		return
	}
	start := int(s.next.Add(1))
	var out net.Conn
	for i := range addrs {
		var err error
		if out, err = net.DialTimeout("tcp", addrs[(start+i)%len(addrs)], endpointCheckTimeout); err == nil {
			break
		}
	}
	if out == nil {
		return
	}
	defer out.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done // either side ended: close both, which ends the other copy
}

// close stops accepting; open connections end with their replicas or the API server.
func (s *service) close() { _ = s.listener.Close() }

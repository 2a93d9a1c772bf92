package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	k, err := KnobsFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := run(ctx, k, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	s.Print(os.Stdout)
	path := filepath.Join(k.Out, "summary.json")
	if err := s.WriteJSON(path); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Printf("\nsummary: %s; profiles (go tool pprof -top): %s, %s\n", path,
		filepath.Join(k.Out, "operator-*.pprof"), filepath.Join(k.Out, "apiserver-cpu.pprof"))
}

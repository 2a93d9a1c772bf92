// Command operator-image writes the operator image as an image archive without Docker (`make image`): the
// static Linux binary given by -binary, in the layout the Dockerfile's last stage gives it.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/images"
)

func main() {
	binary := flag.String("binary", "", "static Linux build of ./cmd/kubectl-trainjob")
	ref := flag.String("ref", "", "image reference, e.g. ghcr.io/kubectl-trainjob/kubectl-trainjob:v1.0.0")
	version := flag.String("version", "", "version label")
	commit := flag.String("commit", "", "revision label")
	arch := flag.String("arch", "", "GOARCH of the binary (default this machine's)")
	created := flag.Int64("created", 0, "image time, seconds since the Unix epoch (SOURCE_DATE_EPOCH)")
	out := flag.String("out", "", "archive to write")
	flag.Parse()
	if *binary == "" || *ref == "" || *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: operator-image -binary FILE -ref IMAGE -out ARCHIVE [-version V] [-commit C] [-arch A] [-created EPOCH]")
		os.Exit(2)
	}
	spec := images.Operator(*binary, *ref, *version, *commit)
	spec.Arch = *arch
	spec.Created = time.Unix(*created, 0)
	if err := images.WriteArchive(spec, *out); err != nil {
		fmt.Fprintln(os.Stderr, "operator-image:", err)
		os.Exit(1)
	}
}

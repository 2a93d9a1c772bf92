// Command plugin-label is kubectl-trainjob with one more pipeline plugin,
// PodLabel: the binary a platform team builds for its own plugins, as it
// would build kube-scheduler with app.WithPlugin. Its operator, render and
// describe-pipeline all run the pipeline with PodLabel in it; the
// operator's configuration (field plugins) can disable or move it.
package main

import (
	"os"

	"github.com/kubectl-trainjob/kubectl-trainjob/cmd/kubectl-trainjob/app"
	"github.com/kubectl-trainjob/kubectl-trainjob/examples/plugin-label/podlabel"
)

func main() {
	os.Exit(app.Main(app.WithPlugin(podlabel.Name, podlabel.New)))
}

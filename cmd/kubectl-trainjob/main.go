// Command kubectl-trainjob is both the kubectl plugin (`kubectl trainjob …`)
// and the operator (`kubectl-trainjob operator`).
package main

import (
	"os"

	"github.com/kubectl-trainjob/kubectl-trainjob/cmd/kubectl-trainjob/app"
)

func main() {
	os.Exit(app.Main())
}

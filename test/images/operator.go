package images

// The operator image: what the Dockerfile's last stage produces, built without Docker (`make image`). A test
// reads the Dockerfile and fails when the two disagree.
const (
	// OperatorPath is where the kubectl-trainjob binary is in the operator image.
	OperatorPath = "/kubectl-trainjob"
	// OperatorSource is the label that links the image to its repository.
	OperatorSource = "https://github.com/kubectl-trainjob/kubectl-trainjob"
)

// Operator is the operator image of binary (a static linux build of ./cmd/kubectl-trainjob) named ref.
func Operator(binary, ref, version, commit string) Spec {
	return Spec{
		Ref:        ref,
		Binary:     binary,
		Path:       OperatorPath,
		Entrypoint: []string{OperatorPath},
		User:       NonRootUser,
		Labels: map[string]string{
			"org.opencontainers.image.title":    "kubectl-trainjob",
			"org.opencontainers.image.source":   OperatorSource,
			"org.opencontainers.image.licenses": "Apache-2.0",
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": commit,
		},
	}
}

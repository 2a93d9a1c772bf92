package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// operatorImageName is the operator's image name after config/manager's own `images:` (which gives it tag
// latest); a user's overlay replaces it with its `images:`.
const operatorImageName = "ghcr.io/kubectl-trainjob/kubectl-trainjob"

// rolloutTimeout bounds how long the operator's Deployment may take to roll out on the real node.
const rolloutTimeout = 3 * time.Minute

// UpAsDeployment installs the product on a cluster with a real node exactly as a user would: everything
// `kustomize build config/default` produces, with only the operator's image set (kustomize `images:`) and its
// pods given the real node (its label and the toleration of its taint), applied server-side. The operator then runs as its Deployment's pods on the real node — probes by the kubelet,
// webhooks reached through their Service, the certificate the operator writes into its Secret. image must be
// one of the cluster's Options.RealNodeImages. It returns once the Deployment has rolled out and the webhooks
// admit; Down has nothing to stop (the cluster's Stop removes the pods). args, when given, are added to the
// operator's command line (say, --feature-gates=TrainJobStatus=true), as a user's overlay would patch them in.
func UpAsDeployment(ctx context.Context, c *cluster.Cluster, image string, logf func(string, ...any), args ...string) (*Stack, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	objs, err := buildManifestsWithImage(ctx, root, image, args)
	if err != nil {
		return nil, err
	}
	logf("applying %d objects of `kustomize build` of config/default with image %s %v (server-side)", len(objs), image, args)
	if err := applyObjects(ctx, cl, objs); err != nil {
		return nil, err
	}
	s := &Stack{Cluster: c, Client: cl}
	volumesCtx, stopVolumes := context.WithCancel(context.WithoutCancel(ctx))
	s.stopVolumes = stopVolumes
	if err := bindVolumes(volumesCtx, c.Clientset(), logf); err != nil {
		return nil, errors.Join(err, s.Down())
	}
	if err := WaitRollout(ctx, cl); err != nil {
		return nil, errors.Join(err, s.Down())
	}
	logf("operator Deployment rolled out; webhooks admit through the Service")
	return s, nil
}

// buildManifestsWithImage is buildManifests of a kustomization in dir that takes config/default and sets the
// operator's image, as `kustomize edit set image kubectl-trainjob=<image>` would in a user's overlay, puts its
// pods on the real node (its label and its taint's toleration) and adds args to its command line with a JSON
// patch.
func buildManifestsWithImage(ctx context.Context, root, image string, args []string) ([]*unstructured.Unstructured, error) {
	name, tag, ok := strings.Cut(image, ":")
	if !ok || strings.Contains(tag, "/") {
		return nil, fmt.Errorf("image %q: want name:tag", image)
	}
	// kustomize takes resources by relative path only: the overlay goes in the clone's bin/, which git ignores.
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		return nil, err
	}
	overlay, err := os.MkdirTemp(filepath.Join(root, "bin"), "operator-overlay-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(overlay)
	base, err := filepath.Rel(overlay, filepath.Join(root, kustomizationDir))
	if err != nil {
		return nil, err
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: %s
    newName: %s
    newTag: %q
`, base, operatorImageName, name, tag)
	// The real node is tainted as a cluster taints the nodes it keeps for some pods: the operator's pods
	// tolerate the taint and select the node, as the overlay of such a cluster would make them.
	tol := cluster.RealNodeToleration()
	kustomization += "patches:\n  - target: {kind: Deployment}\n    patch: |-\n" +
		fmt.Sprintf("      - {op: add, path: /spec/template/spec/nodeSelector, value: {%q: \"true\"}}\n", cluster.RealNodeLabel) +
		fmt.Sprintf("      - {op: add, path: /spec/template/spec/tolerations, value: [{key: %q, operator: %s, value: %q, effect: %s}]}\n", tol.Key, tol.Operator, tol.Value, tol.Effect)
	for _, a := range args {
		kustomization += fmt.Sprintf("      - {op: add, path: /spec/template/spec/containers/0/args/-, value: %q}\n", a)
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return nil, err
	}
	// config/default is outside the overlay's folder: kustomize must be allowed to load it.
	return kustomizeBuild(ctx, root, "--load-restrictor=LoadRestrictionsNone", overlay)
}

// WaitRollout waits until the operator's Deployment has rolled out (every replica updated and available, as
// `kubectl rollout status` waits) and the TrainJob webhooks admit.
func WaitRollout(ctx context.Context, cl client.Client) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, rolloutTimeout, true, func(ctx context.Context) (bool, error) {
		var list appsv1.DeploymentList
		if err := cl.List(ctx, &list, client.MatchingLabels{"app.kubernetes.io/name": "kubectl-trainjob", "app.kubernetes.io/component": "operator"}); err != nil {
			last = err
			return false, nil
		}
		if len(list.Items) != 1 {
			last = fmt.Errorf("%d operator Deployments", len(list.Items))
			return false, nil
		}
		d := list.Items[0]
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		st := d.Status
		if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.AvailableReplicas != want || st.Replicas != want {
			last = fmt.Errorf("Deployment %s: %d of %d replicas updated, %d available", d.Name, st.UpdatedReplicas, want, st.AvailableReplicas)
			return false, nil
		}
		last = webhooksAdmit(ctx, cl)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("the operator's Deployment did not roll out within %v: %w", rolloutTimeout, last)
	}
	return err
}

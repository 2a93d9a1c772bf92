package install

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

var (
	crdGVR      = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	trainJobGVR = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainjobs"}
)

// probeRuntime is the shipped runtime the webhook probe's TrainJob names.
const probeRuntime = "torch-distributed"

// install applies the objects in order — the CRDs first, waiting until they are served before the runtimes
// go in — and then waits for the operator.
func (o *Options) install(ctx context.Context) error {
	waitCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if o.DryRun == "none" {
		o.progress("Installing the operator into namespace %s (image %s)", o.Namespace, o.Image)
	}
	var dryRun []string
	if o.DryRun == "server" {
		dryRun = []string{metav1.DryRunAll}
	}
	namespaceExists := false
	if o.DryRun == "server" {
		_, err := o.clients.clientset.CoreV1().Namespaces().Get(ctx, o.Namespace, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s: %w", o.Namespace, err)
		}
		namespaceExists = err == nil
	}
	var applied []map[string]any
	var crds []string
	crdsServed := false
	for _, u := range o.Objects {
		if o.DryRun == "client" {
			fmt.Fprintf(o.Streams.Out, "%s serverside-applied%s\n", ref(u), o.dryRunSuffix())
			continue
		}
		isCRD := isCRD(u)
		if !isCRD && len(crds) > 0 && !crdsServed && o.DryRun == "none" {
			if err := o.waitEstablished(waitCtx, crds); err != nil {
				return err
			}
			o.clients.mapper.Reset()
			crdsServed = true
		}
		if u.GetKind() == "Namespace" {
			foreign, err := o.foreignNamespace(ctx, u.GetName())
			if err != nil {
				return err
			}
			if foreign {
				o.progress("namespace/%s exists and install did not create it: using it as it is (--uninstall keeps it)", u.GetName())
				continue
			}
		}
		res, err := o.clients.resource(u)
		// A server dry run creates nothing, so what needs a CRD or the namespace that it would create cannot
		// be checked.
		if meta.IsNoMatchError(err) && o.DryRun == "server" && definedKinds(o.Objects)[u.GroupVersionKind().GroupKind()] {
			fmt.Fprintf(o.Streams.ErrOut, "%s skipped (server dry run: its CRD is not installed yet)\n", ref(u))
			continue
		}
		if err == nil && o.DryRun == "server" && u.GetNamespace() == o.Namespace && !namespaceExists {
			fmt.Fprintf(o.Streams.ErrOut, "%s skipped (server dry run: namespace %s is not created yet)\n", ref(u), o.Namespace)
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", ref(u), err)
		}
		got, err := res.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: FieldManager, Force: o.ForceConflicts, DryRun: dryRun})
		if err != nil {
			return fmt.Errorf("apply %s: %w", ref(u), err)
		}
		if isCRD {
			crds = append(crds, u.GetName())
		}
		applied = append(applied, got.Object)
		if o.Output == "" {
			fmt.Fprintf(o.Streams.Out, "%s serverside-applied%s\n", ref(u), o.dryRunSuffix())
		}
	}
	if o.Output != "" {
		return o.print(applied)
	}
	if o.DryRun != "none" || !o.Wait {
		return nil
	}
	if err := o.waitDeployment(waitCtx); err != nil {
		return err
	}
	if o.WaitForWebhook {
		if err := o.waitWebhook(waitCtx); err != nil {
			return err
		}
	}
	o.progress("The operator is ready in namespace %s.", o.Namespace)
	return nil
}

func isCRD(u *unstructured.Unstructured) bool {
	return u.GetKind() == "CustomResourceDefinition" && u.GroupVersionKind().Group == crdGVR.Group
}

// definedKinds are the kinds the CRDs among objs define.
func definedKinds(objs []*unstructured.Unstructured) map[schema.GroupKind]bool {
	kinds := map[schema.GroupKind]bool{}
	for _, u := range objs {
		if isCRD(u) {
			group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
			kinds[schema.GroupKind{Group: group, Kind: kind}] = true
		}
	}
	return kinds
}

// resource is the dynamic client of u's kind and namespace. A kind the mapper does not know yet (a CRD
// applied moments ago) makes it read discovery again once.
func (c *clients) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.mapper.Reset()
		mapping, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, err
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dynamic.Resource(mapping.Resource).Namespace(u.GetNamespace()), nil
	}
	return c.dynamic.Resource(mapping.Resource), nil
}

// foreignNamespace tells whether namespace name exists without install's label: install then uses it
// without applying to it, and uninstall leaves it.
func (o *Options) foreignNamespace(ctx context.Context, name string) (bool, error) {
	ns, err := o.clients.clientset.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("namespace %s: %w", name, err)
	}
	return ns.Labels[ManagedLabel] != ManagedLabelValue, nil
}

// poll calls cond every PollInterval until it is done, printing each new state it reports. When ctx ends
// (the --timeout), the error says what it waited for and the last state, with exit code 3.
func (o *Options) poll(ctx context.Context, what string, cond func(context.Context) (done bool, state string)) error {
	o.progress("Waiting for %s", what)
	last := ""
	err := wait.PollUntilContextCancel(ctx, o.PollInterval, true, func(ctx context.Context) (bool, error) {
		done, state := cond(ctx)
		if !done && state != last {
			o.progress("  %s", state)
			last = state
		}
		return done, nil
	})
	if wait.Interrupted(err) {
		return cmdutil.WithExitCode(cmdutil.ExitTimeout, fmt.Errorf("timed out after %s waiting for %s (%s)", o.Timeout, what, last))
	}
	return err
}

func (o *Options) waitEstablished(ctx context.Context, names []string) error {
	return o.poll(ctx, "the CRDs to be served", func(ctx context.Context) (bool, string) {
		for _, name := range names {
			u, err := o.clients.dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if !conditionTrue(u, "Established") {
				return false, "customresourcedefinition/" + name + " is not Established yet"
			}
		}
		return true, ""
	})
}

func conditionTrue(u *unstructured.Unstructured, condType string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == condType {
			return m["status"] == "True"
		}
	}
	return false
}

// waitDeployment waits as `kubectl rollout status` does: the new spec observed, every replica updated and
// available. While it waits it names the first pod that is not ready and why.
func (o *Options) waitDeployment(ctx context.Context) error {
	what := fmt.Sprintf("deployment %s/%s to be Available", o.Namespace, OperatorDeployment)
	return o.poll(ctx, what, func(ctx context.Context) (bool, string) {
		d, err := o.clients.clientset.AppsV1().Deployments(o.Namespace).Get(ctx, OperatorDeployment, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		done, state := rolloutStatus(d)
		if done {
			return true, ""
		}
		if why := o.podNotReady(ctx, d); why != "" {
			state += "; " + why
		}
		return false, state
	})
}

// rolloutStatus is kubectl's DeploymentStatusViewer in short.
func rolloutStatus(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	switch {
	case s.ObservedGeneration < d.Generation:
		return false, "the new spec is not observed yet"
	case s.UpdatedReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas updated", s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		return false, fmt.Sprintf("%d old replicas are pending termination", s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < s.UpdatedReplicas:
		return false, fmt.Sprintf("%d of %d updated replicas available", s.AvailableReplicas, s.UpdatedReplicas)
	}
	return true, ""
}

// podNotReady names the first of d's pods that is not ready and why: a container's waiting reason
// (ImagePullBackOff: …), or the scheduler's message.
func (o *Options) podNotReady(ctx context.Context, d *appsv1.Deployment) string {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return ""
	}
	pods, err := o.clients.clientset.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return ""
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || podReady(&p) {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				return fmt.Sprintf("pod %s: %s %s", p.Name, w.Reason, w.Message)
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return fmt.Sprintf("pod %s: %s %s", p.Name, c.Reason, c.Message)
			}
		}
		return fmt.Sprintf("pod %s is %s", p.Name, p.Status.Phase)
	}
	return ""
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitWebhook waits until the operator's webhooks admit (or deny) a dry-run TrainJob. Until the operator
// serves them, with the CA it generates injected, the API server answers "failed calling webhook".
func (o *Options) waitWebhook(ctx context.Context) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trainer.kubeflow.org/v1alpha1",
		"kind":       "TrainJob",
		"metadata":   map[string]any{"name": "kubectl-trainjob-install-probe", "namespace": o.Namespace},
		"spec":       map[string]any{"runtimeRef": map[string]any{"name": probeRuntime}},
	}}
	return o.poll(ctx, "the operator's webhook to answer", func(ctx context.Context) (bool, string) {
		_, err := o.clients.dynamic.Resource(trainJobGVR).Namespace(o.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return webhookAnswered(err)
	})
}

// webhookAnswered tells from a dry-run create whether the webhooks answered: the create passed, or a
// webhook denied it.
func webhookAnswered(err error) (bool, string) {
	if err == nil {
		return true, ""
	}
	msg := err.Error()
	if strings.Contains(msg, "admission webhook") && strings.Contains(msg, "denied the request") {
		return true, ""
	}
	return false, msg
}

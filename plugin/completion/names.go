package completion

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// listLimit bounds how many names one completion reads, as kueuectl does.
const listLimit = 100

// lookupTimeout bounds a completion's requests: a shell waiting on a TAB must not hang.
const lookupTimeout = 5 * time.Second

// RuntimeKindPrefix is how a namespaced runtime is named where a ClusterTrainingRuntime is the default
// (create --runtime): trainingruntime/NAME.
const RuntimeKindPrefix = "trainingruntime/"

// TrainJobNames completes the names of the TrainJobs in the namespace, leaving out those already given (for
// commands that take several).
func TrainJobNames(f *cmdutil.Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cl, ns, ok := clientAndNamespace(f)
		if !ok {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(contextOf(cmd), lookupTimeout)
		defer cancel()
		var list trainer.TrainJobList
		if err := cl.List(ctx, &list, client.InNamespace(ns), client.Limit(listLimit)); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []cobra.Completion
		for _, tj := range list.Items {
			if strings.HasPrefix(tj.Name, toComplete) && !slices.Contains(args, tj.Name) {
				names = append(names, tj.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// RuntimeNames completes runtime names: ClusterTrainingRuntimes by name, and the namespace's
// TrainingRuntimes as trainingruntime/NAME. Each comes with its kind as description.
func RuntimeNames(f *cmdutil.Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cl, ns, ok := clientAndNamespace(f)
		if !ok {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(contextOf(cmd), lookupTimeout)
		defer cancel()
		var names []cobra.Completion
		add := func(name, kind string) {
			if strings.HasPrefix(name, toComplete) {
				names = append(names, cobra.CompletionWithDesc(name, kind))
			}
		}
		var cluster trainer.ClusterTrainingRuntimeList
		if err := cl.List(ctx, &cluster, client.Limit(listLimit)); err == nil {
			for _, r := range cluster.Items {
				add(r.Name, trainer.ClusterTrainingRuntimeKind)
			}
		}
		var namespaced trainer.TrainingRuntimeList
		if err := cl.List(ctx, &namespaced, client.InNamespace(ns), client.Limit(listLimit)); err == nil {
			for _, r := range namespaced.Items {
				add(RuntimeKindPrefix+r.Name, trainer.TrainingRuntimeKind)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

func clientAndNamespace(f *cmdutil.Factory) (client.Client, string, bool) {
	ns, _, err := f.Namespace()
	if err != nil {
		return nil, "", false
	}
	cl, err := f.Client()
	if err != nil {
		return nil, "", false
	}
	return cl, ns, true
}

func contextOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// TrainJobNodes completes the Kubernetes nodes the pods of the TrainJob named by the first argument run on
// (logs --node).
func TrainJobNodes(f *cmdutil.Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cl, ns, ok := clientAndNamespace(f)
		if !ok {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(contextOf(cmd), lookupTimeout)
		defer cancel()
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: args[0]}); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var nodes []cobra.Completion
		for _, p := range pods.Items {
			if n := p.Spec.NodeName; n != "" && strings.HasPrefix(n, toComplete) && !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
		slices.Sort(nodes)
		return nodes, cobra.ShellCompDirectiveNoFileComp
	}
}

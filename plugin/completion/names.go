package completion

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/optimizationjob"
)

// listLimit bounds how many names one completion reads, as kueuectl does.
const listLimit = 100

// lookupTimeout bounds a completion's requests: a shell waiting on a TAB must not hang.
const lookupTimeout = 5 * time.Second

// RuntimeKindPrefix is how a namespaced runtime is named where a ClusterTrainingRuntime is the default
// (create --runtime): trainingruntime/NAME.
const RuntimeKindPrefix = "trainingruntime/"

// Lookup reads completions from the cluster of the current context: the namespace and the client are
// resolved from the command's flags, and any failure (no cluster, no rights) completes nothing.
type Lookup func(ctx context.Context, c client.Client, namespace string, cmd *cobra.Command, args []string, toComplete string) []cobra.Completion

// FromCluster is a completion function that runs lookup within a short timeout. Completions are not files.
func FromCluster(f cmdutil.Factory, lookup Lookup, directive cobra.ShellCompDirective) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		directive |= cobra.ShellCompDirectiveNoFileComp
		ns, _, err := f.Namespace()
		if err != nil {
			return nil, directive
		}
		cl, err := f.Client()
		if err != nil {
			return nil, directive
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		defer cancel()
		return lookup(ctx, cl, ns, cmd, args, toComplete), directive
	}
}

// TrainJobNames completes the names of the TrainJobs in the namespace, leaving out those already given (for
// commands that take several).
func TrainJobNames(f cmdutil.Factory) cobra.CompletionFunc {
	return FromCluster(f, func(ctx context.Context, cl client.Client, ns string, _ *cobra.Command, args []string, toComplete string) []cobra.Completion {
		var list trainer.TrainJobList
		if cl.List(ctx, &list, client.InNamespace(ns), client.Limit(listLimit)) != nil {
			return nil
		}
		var names []cobra.Completion
		for _, tj := range list.Items {
			if strings.HasPrefix(tj.Name, toComplete) && !slices.Contains(args, tj.Name) {
				names = append(names, tj.Name)
			}
		}
		return names
	}, 0)
}

// TrainJobOrOptimizationJobNames completes, for the commands that take NAME or optimizationjob/NAME (status,
// delete), TrainJob names as TrainJobNames does and, once the argument starts with optimizationjob/ (or another
// spelling of the type, optimizationjob.NameOf), the names of the namespace's OptimizationJobs behind it, leaving
// out those already given.
func TrainJobOrOptimizationJobNames(f cmdutil.Factory) cobra.CompletionFunc {
	trainJobs := TrainJobNames(f)
	optimizationJobs := FromCluster(f, func(ctx context.Context, cl client.Client, ns string, _ *cobra.Command, args []string, toComplete string) []cobra.Completion {
		typ, prefix, _ := strings.Cut(toComplete, "/")
		var list trainer.OptimizationJobList
		if cl.List(ctx, &list, client.InNamespace(ns), client.Limit(listLimit)) != nil {
			return nil
		}
		given := func(name string) bool {
			return slices.ContainsFunc(args, func(arg string) bool {
				n, ok := optimizationjob.NameOf(arg)
				return ok && n == name
			})
		}
		var names []cobra.Completion
		for _, oj := range list.Items {
			if strings.HasPrefix(oj.Name, prefix) && !given(oj.Name) {
				names = append(names, typ+"/"+oj.Name)
			}
		}
		return names
	}, 0)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if typ, _, ok := strings.Cut(toComplete, "/"); ok && optimizationjob.IsType(typ) {
			return optimizationJobs(cmd, args, toComplete)
		}
		return trainJobs(cmd, args, toComplete)
	}
}

// RuntimeNames completes runtime names: ClusterTrainingRuntimes by name, and the namespace's
// TrainingRuntimes as trainingruntime/NAME. Each comes with its kind as description.
func RuntimeNames(f cmdutil.Factory) cobra.CompletionFunc {
	return FromCluster(f, func(ctx context.Context, cl client.Client, ns string, _ *cobra.Command, _ []string, toComplete string) []cobra.Completion {
		var names []cobra.Completion
		add := func(name, kind string) {
			if strings.HasPrefix(name, toComplete) {
				names = append(names, cobra.CompletionWithDesc(name, kind))
			}
		}
		var cluster trainer.ClusterTrainingRuntimeList
		if cl.List(ctx, &cluster, client.Limit(listLimit)) == nil {
			for _, r := range cluster.Items {
				add(r.Name, trainer.ClusterTrainingRuntimeKind)
			}
		}
		var namespaced trainer.TrainingRuntimeList
		if cl.List(ctx, &namespaced, client.InNamespace(ns), client.Limit(listLimit)) == nil {
			for _, r := range namespaced.Items {
				add(RuntimeKindPrefix+r.Name, trainer.TrainingRuntimeKind)
			}
		}
		return names
	}, 0)
}

// TrainJobNodes completes the Kubernetes nodes the pods of the TrainJob named by the first argument run on
// (logs --node): its pods (cmdutil.Lineage), not every pod with its labels.
func TrainJobNodes(f cmdutil.Factory) cobra.CompletionFunc {
	return FromCluster(f, func(ctx context.Context, cl client.Client, ns string, _ *cobra.Command, args []string, toComplete string) []cobra.Completion {
		if len(args) == 0 {
			return nil
		}
		tj := &trainer.TrainJob{}
		if cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, tj) != nil {
			return nil
		}
		lineage, err := cmdutil.ReadLineage(ctx, cl, tj)
		if err != nil {
			return nil
		}
		var all corev1.PodList
		if cl.List(ctx, &all, client.InNamespace(ns), cmdutil.ChildrenOf(args[0])) != nil {
			return nil
		}
		pods, err := lineage.Pods(ctx, all.Items)
		if err != nil {
			return nil
		}
		var nodes []cobra.Completion
		for _, p := range pods {
			if n := p.Spec.NodeName; n != "" && strings.HasPrefix(n, toComplete) && !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
		slices.Sort(nodes)
		return nodes
	}, 0)
}

// TrainerRanks completes the ranks of the trainer (the replicated job node) of the TrainJob named by the
// first argument, read from its JobSet (port-forward --rank).
func TrainerRanks(f cmdutil.Factory) cobra.CompletionFunc {
	return FromCluster(f, func(ctx context.Context, cl client.Client, ns string, _ *cobra.Command, args []string, toComplete string) []cobra.Completion {
		if len(args) == 0 {
			return nil
		}
		js := &jobsetv1alpha2.JobSet{}
		if cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, js) != nil {
			return nil
		}
		var ranks []cobra.Completion
		for _, rj := range js.Spec.ReplicatedJobs {
			if rj.Name != trainer.Node {
				continue
			}
			for r := range int(rj.Replicas) * cmdutil.PodsPerJob(rj.Template.Spec) {
				if s := strconv.Itoa(r); strings.HasPrefix(s, toComplete) {
					ranks = append(ranks, s)
				}
			}
		}
		return ranks
	}, cobra.ShellCompDirectiveKeepOrder)
}

// GPUProductLabel is the label NVIDIA's GPU feature discovery gives a node with the model of its GPUs
// (NVIDIA-A100-SXM4-80GB): what create --gpu-type selects nodes by.
const GPUProductLabel = "nvidia.com/gpu.product"

// nodeListLimit bounds how many nodes a completion of GPU models reads: only their labels are read, so a
// large cluster's first thousand cost little.
const nodeListLimit = 1000

// GPUProducts completes the GPU models of the cluster's nodes (their GPUProductLabel), each with how many
// nodes have it. Only the nodes' metadata is read.
func GPUProducts(f cmdutil.Factory) cobra.CompletionFunc {
	return FromCluster(f, func(ctx context.Context, cl client.Client, _ string, _ *cobra.Command, _ []string, toComplete string) []cobra.Completion {
		nodes := &metav1.PartialObjectMetadataList{}
		nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
		if cl.List(ctx, nodes, client.HasLabels{GPUProductLabel}, client.Limit(nodeListLimit)) != nil {
			return nil
		}
		count := map[string]int{}
		for _, n := range nodes.Items {
			if p := n.Labels[GPUProductLabel]; strings.HasPrefix(p, toComplete) {
				count[p]++
			}
		}
		var products []cobra.Completion
		for p, n := range count {
			desc := fmt.Sprintf("%d nodes", n)
			if n == 1 {
				desc = "1 node"
			}
			products = append(products, cobra.CompletionWithDesc(p, desc))
		}
		slices.Sort(products)
		return products
	}, 0)
}

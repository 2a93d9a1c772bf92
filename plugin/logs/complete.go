package logs

import (
	"context"
	"strconv"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
)

// completeRank completes --rank with all and the ranks of the stage asked for (the trainer by default), read
// from the TrainJob's JobSet.
func completeRank(f cmdutil.Factory) cobra.CompletionFunc {
	return completion.FromCluster(f, func(ctx context.Context, cl client.Client, ns string, cmd *cobra.Command, args []string, _ string) []cobra.Completion {
		ranks := []cobra.Completion{"all"}
		if len(args) == 0 {
			return ranks
		}
		js := &jobsetv1alpha2.JobSet{}
		if cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, js) != nil {
			return ranks
		}
		stage, _ := cmd.Flags().GetString("stage")
		p, err := newPlan(selection{stage: stage, rank: allRanks}, args[0], js)
		if err != nil {
			return ranks
		}
		for r := range p.steps[len(p.steps)-1].ranks {
			ranks = append(ranks, strconv.Itoa(r))
		}
		return ranks
	}, cobra.ShellCompDirectiveKeepOrder)
}

package logs

import (
	"context"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// completeRank completes --rank with the ranks of the stage asked for (the trainer by default), read from the
// TrainJob's JobSet, and all.
func completeRank(f *cmdutil.Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ranks := []cobra.Completion{"all"}
		if len(args) == 0 {
			return append(ranks, "0"), cobra.ShellCompDirectiveNoFileComp
		}
		ns, _, err := f.Namespace()
		if err != nil {
			return ranks, cobra.ShellCompDirectiveNoFileComp
		}
		cl, err := f.Client()
		if err != nil {
			return ranks, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		js := &jobsetv1alpha2.JobSet{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, js); err != nil {
			return ranks, cobra.ShellCompDirectiveNoFileComp
		}
		stage, _ := cmd.Flags().GetString("stage")
		p, err := newPlan(selection{stage: stage, rank: allRanks}, args[0], js)
		if err != nil {
			return ranks, cobra.ShellCompDirectiveNoFileComp
		}
		last := p.steps[len(p.steps)-1]
		for r := range last.ranks {
			ranks = append(ranks, strconv.Itoa(r))
		}
		return ranks, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
	}
}

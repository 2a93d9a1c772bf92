package pipeline_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

func TestEndpoints(t *testing.T) {
	cases := map[string]struct {
		network   string // the JobSet's network, "" for none
		want      []string
		wantFirst string
	}{
		"the TrainJob's name is the default subdomain, as upstream": {
			want:      []string{"alpha-node-0-0.alpha", "alpha-node-0-1.alpha", "alpha-node-1-0.alpha", "alpha-node-1-1.alpha"},
			wantFirst: "alpha-node-0-0.alpha",
		},
		"an empty subdomain is the default": {
			network:   "{subdomain: ''}",
			want:      []string{"alpha-node-0-0.alpha", "alpha-node-0-1.alpha", "alpha-node-1-0.alpha", "alpha-node-1-1.alpha"},
			wantFirst: "alpha-node-0-0.alpha",
		},
		"the JobSet's subdomain": {
			network:   "{subdomain: workers}",
			want:      []string{"alpha-node-0-0.workers", "alpha-node-0-1.workers", "alpha-node-1-0.workers", "alpha-node-1-1.workers"},
			wantFirst: "alpha-node-0-0.workers",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := pipelinetest.TrainJob(t, `{metadata: {name: alpha}, spec: {runtimeRef: {name: plain}}}`)
			rt := pipelinetest.TrainerRuntime{Name: "plain", Network: tc.network, Pod: "{containers: [{name: node, image: app:v1}]}"}
			info := pipelinetest.Info(t, tj, rt.Runtime(t))
			got := slices.Collect(pipeline.Endpoints(tj.Name, "node", 2, 2, info.Subdomain(tj)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Endpoints (-want +got):\n%s", diff)
			}
			if first := info.FirstEndpoint(tj, "node"); first != tc.wantFirst || first != got[0] {
				t.Errorf("FirstEndpoint = %q, want %q, the first of Endpoints", first, tc.wantFirst)
			}
		})
	}
}

func TestEndpointsStopWhenAsked(t *testing.T) {
	var got []string
	for e := range pipeline.Endpoints("alpha", "node", 1, 1_000_000, "alpha") {
		if got = append(got, e); len(got) == 2 {
			break
		}
	}
	if diff := cmp.Diff([]string{"alpha-node-0-0.alpha", "alpha-node-0-1.alpha"}, got); diff != "" {
		t.Errorf("Endpoints (-want +got):\n%s", diff)
	}
}

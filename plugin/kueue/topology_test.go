package kueue

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolveLevel(t *testing.T) {
	local := Topology{Name: "gpu-topology", Levels: []string{"cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname"}}
	gke := Topology{Name: "gke", Levels: []string{"cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock", "kubernetes.io/hostname"}}
	tests := []struct {
		name       string
		topologies []Topology
		level      string
		want       string
		wantErr    string
	}{
		{name: "a short name", topologies: []Topology{local}, level: "rack", want: "cloud.provider.com/topology-rack"},
		{name: "the node label", topologies: []Topology{local}, level: "cloud.provider.com/topology-block", want: "cloud.provider.com/topology-block"},
		{name: "the host", topologies: []Topology{local, gke}, level: "hostname", want: "kubernetes.io/hostname"},
		{name: "GKE's names", topologies: []Topology{gke}, level: "subblock", want: "cloud.google.com/gce-topology-subblock"},
		{
			name: "no such level", topologies: []Topology{local}, level: "row",
			wantErr: `no level of the cluster's Kueue Topologies is called "row": use one of block (cloud.provider.com/topology-block), rack (cloud.provider.com/topology-rack), hostname (kubernetes.io/hostname)`,
		},
		{
			name: "a name of two labels", topologies: []Topology{local, gke}, level: "block",
			wantErr: `level "block" is ambiguous: it names cloud.provider.com/topology-block and cloud.google.com/gce-topology-block; give the node label`,
		},
		{
			name: "no Topology", level: "rack",
			wantErr: "the cluster has no Kueue Topology, so Kueue cannot place pods by topology: an administrator creates one and a ResourceFlavor that names it",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveLevel(tt.topologies, tt.level)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if got != tt.want || gotErr != tt.wantErr {
				t.Errorf("ResolveLevel(%q) = %q, %q; want %q, %q", tt.level, got, gotErr, tt.want, tt.wantErr)
			}
		})
	}
}

// TestAssignedDomains: a topology assignment as Kueue v0.17 writes it (v1beta2: slices of hostnames with a
// common prefix) and as v1beta1 did (domains) reads as the same domains.
func TestAssignedDomains(t *testing.T) {
	v1beta2 := `{"levels": ["kubernetes.io/hostname"], "slices": [
	  {"domainCount": 2, "valuesPerLevel": [{"individual": {"prefix": "gpu-node-", "roots": ["2", "3"]}}], "podCounts": {"universal": 1}},
	  {"domainCount": 1, "valuesPerLevel": [{"universal": "cpu-node-0"}], "podCounts": {"individual": [3]}}]}`
	v1beta1 := `{"levels": ["kubernetes.io/hostname"], "domains": [{"values": ["gpu-node-2"], "count": 1}, {"values": ["gpu-node-3"], "count": 1},
	  {"values": ["cpu-node-0"], "count": 3}]}`
	want := []Domain{{Values: []string{"gpu-node-2"}, Pods: 1}, {Values: []string{"gpu-node-3"}, Pods: 1}, {Values: []string{"cpu-node-0"}, Pods: 3}}
	for name, doc := range map[string]string{"v1beta2": v1beta2, "v1beta1": v1beta1} {
		var a TopologyAssignment
		if err := json.Unmarshal([]byte(doc), &a); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, a.AssignedDomains()); diff != "" {
			t.Errorf("%s: domains (-want +got):\n%s", name, diff)
		}
	}
}

package kueue

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// The annotations of a pod template by which a pod set asks Kueue's topology-aware scheduling (TAS) to place
// its pods within one domain of a level of a Topology (the level's node label is the value): required, or
// preferred (Kueue then tries the levels above, and at last spreads the pods). For a TrainJob Kueue reads
// them on the pod templates of the JobSet the runtime and the TrainJob's runtime patches make.
const (
	PodSetRequiredTopologyAnnotation  = "kueue.x-k8s.io/podset-required-topology"
	PodSetPreferredTopologyAnnotation = "kueue.x-k8s.io/podset-preferred-topology"
)

// Topology is the part of a Kueue Topology the commands read: its levels' node labels, highest first.
type Topology struct {
	Name   string
	Levels []string
}

type topologyList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Levels []struct {
				NodeLabel string `json:"nodeLabel"`
			} `json:"levels"`
		} `json:"spec"`
	} `json:"items"`
}

// Topologies lists the cluster's Topologies, in one request. Call it once Served said yes.
func (c *Client) Topologies(ctx context.Context) ([]Topology, error) {
	var list topologyList
	if err := c.get(ctx, c.kueuePath("", "topologies"), &list); err != nil {
		return nil, err
	}
	out := make([]Topology, 0, len(list.Items))
	for _, it := range list.Items {
		t := Topology{Name: it.Metadata.Name}
		for _, l := range it.Spec.Levels {
			t.Levels = append(t.Levels, l.NodeLabel)
		}
		out = append(out, t)
	}
	return out, nil
}

// LevelName is how a user names the level of a node label: the label's name without its prefix and without
// what ends in "topology-" ("rack" for cloud.provider.com/topology-rack, "block" for GKE's
// cloud.google.com/gce-topology-block, "hostname" for kubernetes.io/hostname).
func LevelName(label string) string {
	_, name, ok := strings.Cut(label, "/")
	if !ok {
		name = label
	}
	if i := strings.LastIndex(name, "topology-"); i >= 0 {
		name = name[i+len("topology-"):]
	}
	return name
}

// ResolveLevel finds the node label of the level a user named among the levels of topologies: its node label,
// or its LevelName. The error says which levels there are.
func ResolveLevel(topologies []Topology, level string) (string, error) {
	var matches, names []string
	for _, t := range topologies {
		for _, l := range t.Levels {
			if (l == level || LevelName(l) == level) && !slices.Contains(matches, l) {
				matches = append(matches, l)
			}
			if n := fmt.Sprintf("%s (%s)", LevelName(l), l); !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	switch {
	case len(topologies) == 0:
		return "", fmt.Errorf("the cluster has no Kueue Topology, so Kueue cannot place pods by topology: an administrator creates one and a ResourceFlavor that names it")
	case len(matches) == 1:
		return matches[0], nil
	case len(matches) > 1:
		return "", fmt.Errorf("level %q is ambiguous: it names %s; give the node label", level, strings.Join(matches, " and "))
	}
	return "", fmt.Errorf("no level of the cluster's Kueue Topologies is called %q: use one of %s", level, strings.Join(names, ", "))
}

// PodSet is the part of a Workload's pod set the commands read.
type PodSet struct {
	Name            string           `json:"name"`
	Count           int32            `json:"count"`
	TopologyRequest *TopologyRequest `json:"topologyRequest,omitempty"`
}

// TopologyRequest is what a pod set asks of TAS: a required or a preferred level (a node label).
type TopologyRequest struct {
	Required  *string `json:"required,omitempty"`
	Preferred *string `json:"preferred,omitempty"`
}

// PodSetAssignment is the part of a Workload's admission of one pod set the commands read.
type PodSetAssignment struct {
	Name               string              `json:"name"`
	TopologyAssignment *TopologyAssignment `json:"topologyAssignment,omitempty"`
}

// TopologyAssignment is where TAS put a pod set's pods: its levels (node labels, highest first; only
// kubernetes.io/hostname when that is the Topology's lowest level) and the domains, as v1beta2 writes them
// (slices) or v1beta1 (domains).
type TopologyAssignment struct {
	Levels  []string                  `json:"levels"`
	Slices  []TopologyAssignmentSlice `json:"slices,omitempty"`
	Domains []struct {
		Values []string `json:"values"`
		Count  int32    `json:"count"`
	} `json:"domains,omitempty"`
}

// TopologyAssignmentSlice is v1beta2's compact form of domainCount domains.
type TopologyAssignmentSlice struct {
	DomainCount    int32 `json:"domainCount"`
	ValuesPerLevel []struct {
		Universal  *string `json:"universal,omitempty"`
		Individual *struct {
			Prefix *string  `json:"prefix,omitempty"`
			Suffix *string  `json:"suffix,omitempty"`
			Roots  []string `json:"roots"`
		} `json:"individual,omitempty"`
	} `json:"valuesPerLevel"`
	PodCounts struct {
		Universal  *int32  `json:"universal,omitempty"`
		Individual []int32 `json:"individual,omitempty"`
	} `json:"podCounts"`
}

// Domain is one domain of a topology assignment: its value at each level of the assignment, and how many
// pods it runs.
type Domain struct {
	Values []string `json:"values"`
	Pods   int32    `json:"pods"`
}

// AssignedDomains are the domains of the assignment, in Kueue's order, whichever version wrote it.
func (a *TopologyAssignment) AssignedDomains() []Domain {
	var out []Domain
	for _, d := range a.Domains {
		out = append(out, Domain{Values: d.Values, Pods: d.Count})
	}
	for _, s := range a.Slices {
		for i := range int(s.DomainCount) {
			d := Domain{}
			for _, v := range s.ValuesPerLevel {
				switch {
				case v.Universal != nil:
					d.Values = append(d.Values, *v.Universal)
				case v.Individual != nil && i < len(v.Individual.Roots):
					val := v.Individual.Roots[i]
					if v.Individual.Prefix != nil {
						val = *v.Individual.Prefix + val
					}
					if v.Individual.Suffix != nil {
						val += *v.Individual.Suffix
					}
					d.Values = append(d.Values, val)
				}
			}
			switch {
			case s.PodCounts.Universal != nil:
				d.Pods = *s.PodCounts.Universal
			case i < len(s.PodCounts.Individual):
				d.Pods = s.PodCounts.Individual[i]
			}
			out = append(out, d)
		}
	}
	return out
}

// TopologyAssignments are the topology assignments of the Workload's admitted pod sets.
func (wl *Workload) TopologyAssignments() []*TopologyAssignment {
	var out []*TopologyAssignment
	if a := wl.Status.Admission; a != nil {
		for _, ps := range a.PodSetAssignments {
			if ps.TopologyAssignment != nil {
				out = append(out, ps.TopologyAssignment)
			}
		}
	}
	return out
}

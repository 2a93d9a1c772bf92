package status

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// ClaimSummary is one DRA claim of a pod (KEP-2782): its ResourceClaim, the devices it asks for and those
// the scheduler allocated to it, on the node of their pool.
type ClaimSummary struct {
	// Name is the pod's name for the claim; ResourceClaim the object's, empty until it is made from its
	// template.
	Name          string `json:"name"`
	ResourceClaim string `json:"resourceClaim,omitempty"`
	// Requests are the devices asked for, "8 gpu.nvidia.com" (count and DeviceClass).
	Requests []string `json:"requests,omitempty"`
	// Devices are those allocated, "gpu-node-0/gpu-3" (pool, which a node's DRA driver names after the node,
	// and device); none while Allocated is false.
	Devices   []string `json:"devices,omitempty"`
	Allocated bool     `json:"allocated"`
}

// podClaims summarizes the DRA claims of p from the namespace's ResourceClaims, and returns the device
// requests of those found, for the one GPU count (pipeline.PodGPUs).
func podClaims(p *corev1.Pod, claims []resourcev1.ResourceClaim) ([]ClaimSummary, []resourcev1.DeviceRequest) {
	var out []ClaimSummary
	var reqs []resourcev1.DeviceRequest
	for _, c := range p.Spec.ResourceClaims {
		cs := ClaimSummary{Name: c.Name}
		if c.ResourceClaimName != nil {
			cs.ResourceClaim = *c.ResourceClaimName
		}
		for _, st := range p.Status.ResourceClaimStatuses {
			if st.Name == c.Name && st.ResourceClaimName != nil {
				cs.ResourceClaim = *st.ResourceClaimName
			}
		}
		if i := slices.IndexFunc(claims, func(rc resourcev1.ResourceClaim) bool { return rc.Name == cs.ResourceClaim }); i >= 0 && cs.ResourceClaim != "" {
			rc := &claims[i]
			reqs = append(reqs, rc.Spec.Devices.Requests...)
			for _, r := range rc.Spec.Devices.Requests {
				class, mode, count := pipeline.ExactRequest(r)
				if mode == resourcev1.DeviceAllocationModeAll {
					cs.Requests = append(cs.Requests, "all "+class)
					continue
				}
				cs.Requests = append(cs.Requests, fmt.Sprintf("%d %s", max(count, 1), class))
			}
			if a := rc.Status.Allocation; a != nil {
				cs.Allocated = true
				for _, d := range a.Devices.Results {
					cs.Devices = append(cs.Devices, d.Pool+"/"+d.Device)
				}
			}
		}
		out = append(out, cs)
	}
	return out, reqs
}

// claimsUnallocated says which claim of the pod summarized as p the scheduler has not allocated, and what it
// asks for: "ResourceClaim x (16 gpu.nvidia.com) is not allocated"; empty when all are.
func claimsUnallocated(p *PodSummary) string {
	for _, c := range p.Claims {
		if c.Allocated {
			continue
		}
		if c.ResourceClaim == "" {
			return fmt.Sprintf("claim %s has no ResourceClaim yet", c.Name)
		}
		what := ""
		if len(c.Requests) > 0 {
			what = " (" + strings.Join(c.Requests, ", ") + ")"
		}
		return fmt.Sprintf("ResourceClaim %s%s cannot be allocated", c.ResourceClaim, what)
	}
	return ""
}

// claimRows are the rows of the GPU claims section: a pod, its claim, what it asks for and the devices it
// holds, grouped by pool ("gpu-node-0: gpu-0,gpu-1").
func claimRows(pods []PodSummary) [][]string {
	var rows [][]string
	for _, p := range pods {
		for _, c := range p.Claims {
			devices := "not allocated"
			if c.Allocated {
				devices = groupDevices(c.Devices)
			}
			rows = append(rows, []string{p.Name, cmp.Or(c.ResourceClaim, printers.None), cmp.Or(strings.Join(c.Requests, ", "), printers.None), devices})
		}
	}
	return rows
}

// groupDevices writes pool/device names as "pool: a,b; other: c", in their order.
func groupDevices(devices []string) string {
	var pools []string
	byPool := map[string][]string{}
	for _, d := range devices {
		pool, name, _ := strings.Cut(d, "/")
		if _, ok := byPool[pool]; !ok {
			pools = append(pools, pool)
		}
		byPool[pool] = append(byPool[pool], name)
	}
	var parts []string
	for _, pool := range pools {
		parts = append(parts, pool+": "+strings.Join(byPool[pool], ","))
	}
	return cmp.Or(strings.Join(parts, "; "), printers.None)
}

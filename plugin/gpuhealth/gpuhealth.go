// Package gpuhealth decides whether a node's GPUs are sick, and why, from what GPU health tooling writes to the
// API server: a node condition, a node taint, or a DRA device taint (docs/gpus.md, "Sick GPUs"). `status` names
// a sick node in a TrainJob's first failure, `fit` excludes it, and `list -o wide` warns about the TrainJobs
// that run there; all three decide with Of.
//
// It reads only in Read and ReadDevices; Of works on the objects its caller read.
package gpuhealth

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

const (
	// conditionPrefix begins the type of the node conditions GPU health checks set, True while the fault lasts:
	// NVSentinel sets one per check (GpuXidError, GpuPcieWatch, GpuNvlinkWatch, GpuMemWatch, GpuThermalWatch,
	// …), as node-problem-detector's GPU checks do (GPUXidError). Matched without regard to case.
	conditionPrefix = "gpu"
	// taintDomain is the domain of the taints NVIDIA's tooling puts on a node whose GPUs fail (NVSentinel's
	// fault quarantine: nvidia.com/gpu-error, nvidia.com/gpu-xid-error, …, whose integration guide finds
	// quarantined nodes by this prefix), but for presentTaint.
	taintDomain = "nvidia.com/"
	// presentTaint is the GPU operator's taint of every GPU node (nvidia.com/gpu=present:NoSchedule): it says
	// the node has GPUs, not that they are sick.
	presentTaint = "nvidia.com/gpu"
	// aggregatedTaint is the taint NVSentinel's fault quarantine puts on a node in its default rules
	// (AggregatedNodeHealth=False:NoSchedule).
	aggregatedTaint = "AggregatedNodeHealth"
)

// Sickness says that a node's GPUs are sick, and why.
type Sickness struct {
	Node string `json:"node"`
	// Signs are what says so, each in a few words: `condition GpuXidError=True (Xid 79: GPU has fallen off the
	// bus)`, `taint nvidia.com/gpu-error=fatal:NoSchedule`, `device gpu-3 (ResourceSlice …) tainted
	// gpu.example.com/unhealthy:NoExecute`.
	Signs []string `json:"signs"`
}

// Reason says it in a sentence that starts with the node: "gpu-node-1's GPUs are sick: condition …".
func (s *Sickness) Reason() string {
	return s.Node + "'s GPUs are sick: " + strings.Join(s.Signs, "; ")
}

// Devices are the DRA objects that may taint a node's devices: the ResourceSlices that publish them and the
// DeviceTaintRules that select them.
type Devices struct {
	Slices []resourcev1.ResourceSlice
	Rules  []resourcev1beta2.DeviceTaintRule
	// Forbidden names what the user may not list ("ResourceSlices", "DeviceTaintRules"): read as none, which a
	// reader must say rather than show as no devices.
	Forbidden []string
}

// ReadDevices reads the ResourceSlices of node (all of them when node is "") and the DeviceTaintRules. An API
// the cluster does not serve (DeviceTaintRules are beta and off by default in Kubernetes 1.36), or objects the
// user may not list, are none.
func ReadDevices(ctx context.Context, c client.Reader, node string) (Devices, error) {
	var d Devices
	var slices resourcev1.ResourceSliceList
	var opts []client.ListOption
	if node != "" {
		opts = append(opts, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorNodeName, node)})
	}
	if err := c.List(ctx, &slices, opts...); err != nil {
		if !absent(err) {
			return d, fmt.Errorf("list ResourceSlices: %w", err)
		}
		if apierrors.IsForbidden(err) {
			d.Forbidden = append(d.Forbidden, "ResourceSlices")
		}
	}
	var rules resourcev1beta2.DeviceTaintRuleList
	if err := c.List(ctx, &rules); err != nil {
		if !absent(err) {
			return d, fmt.Errorf("list DeviceTaintRules: %w", err)
		}
		if apierrors.IsForbidden(err) {
			d.Forbidden = append(d.Forbidden, "DeviceTaintRules")
		}
	}
	d.Slices, d.Rules = slices.Items, rules.Items
	return d, nil
}

// absent tells whether err says the objects are not there for this user: not served, or forbidden.
func absent(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || meta.IsNoMatchError(err) || apierrors.IsMethodNotSupported(err)
}

// Read reads node and its devices and says whether its GPUs are sick (nil when not, or when the node is gone
// or may not be read).
func Read(ctx context.Context, c client.Reader, node string) (*Sickness, error) {
	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		if absent(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get node %s: %w", node, err)
	}
	d, err := ReadDevices(ctx, c, node)
	if err != nil {
		return nil, err
	}
	return Of(&n, d), nil
}

// Of says whether node's GPUs are sick, and why, or nil: a condition of a GPU health check that is True, a
// taint of NVIDIA's fault quarantine, or a taint of one of the node's DRA devices (in its ResourceSlice, or
// by a DeviceTaintRule that selects it).
func Of(node *corev1.Node, d Devices) *Sickness {
	var signs []string
	for _, c := range node.Status.Conditions {
		if c.Status == corev1.ConditionTrue && len(c.Type) > len(conditionPrefix) && strings.EqualFold(string(c.Type[:len(conditionPrefix)]), conditionPrefix) {
			signs = append(signs, "condition "+string(c.Type)+"=True"+detail(c.Reason, c.Message))
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == aggregatedTaint || strings.HasPrefix(t.Key, taintDomain) && t.Key != presentTaint {
			signs = append(signs, "taint "+printers.Taint(t))
		}
	}
	for i := range d.Slices {
		s := &d.Slices[i]
		if ptr.Deref(s.Spec.NodeName, "") != node.Name {
			continue
		}
		for _, dev := range s.Spec.Devices {
			taints := slices.Clone(dev.Taints)
			for j := range d.Rules {
				if selects(&d.Rules[j], s, dev.Name) {
					t := d.Rules[j].Spec.Taint
					taints = append(taints, resourcev1.DeviceTaint{Key: t.Key, Value: t.Value, Effect: resourcev1.DeviceTaintEffect(t.Effect)})
				}
			}
			for _, t := range taints {
				signs = append(signs, fmt.Sprintf("device %s of %s tainted %s", dev.Name, s.Spec.Driver, deviceTaint(t)))
			}
		}
	}
	if len(signs) == 0 {
		return nil
	}
	return &Sickness{Node: node.Name, Signs: signs}
}

// selects tells whether rule taints device name of slice s: its driver, pool and device, where it names them.
func selects(rule *resourcev1beta2.DeviceTaintRule, s *resourcev1.ResourceSlice, name string) bool {
	sel := rule.Spec.DeviceSelector
	if sel == nil {
		return false
	}
	return (sel.Driver == nil || *sel.Driver == s.Spec.Driver) &&
		(sel.Pool == nil || *sel.Pool == s.Spec.Pool.Name) &&
		(sel.Device == nil || *sel.Device == name)
}

func deviceTaint(t resourcev1.DeviceTaint) string {
	return printers.Taint(corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
}

// detail is " (reason: message)", or what of it there is.
func detail(reason, message string) string {
	switch {
	case reason != "" && message != "":
		return " (" + reason + ": " + message + ")"
	case reason+message != "":
		return " (" + reason + message + ")"
	}
	return ""
}

package pipeline

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// Trace records a Build: which plugin ran at which extension point, in
// order, and what each changed. describe-pipeline prints it.
type Trace struct {
	Runs []Run `json:"runs"`
}

// Run is one plugin's run at one extension point.
type Run struct {
	Point   ExtensionPoint `json:"point"`
	Plugin  string         `json:"plugin"`
	Changes []Change       `json:"changes,omitempty"`
	Objects []string       `json:"objects,omitempty"`
	Error   string         `json:"error,omitempty"`
}

// Change is one thing a plugin changed: where (replicated job and
// container, or the JobSet) and what.
type Change struct {
	Where string `json:"where"`
	What  string `json:"what"`
}

// run calls fn as plugin p at point, wrapping its error, and records it
// when t is not nil.
func (t *Trace) run(point ExtensionPoint, p Plugin, info *RuntimeInfo, fn func() error) error {
	if t == nil {
		if err := fn(); err != nil {
			return &PluginError{Plugin: p.Name(), Point: point, Err: err}
		}
		return nil
	}
	before := snapshotOf(info)
	err := fn()
	r := Run{Point: point, Plugin: p.Name(), Changes: diffInfo(before, snapshotOf(info))}
	if err != nil {
		r.Error = err.Error()
		err = &PluginError{Plugin: p.Name(), Point: point, Err: err}
	}
	t.Runs = append(t.Runs, r)
	return err
}

// objects records what the last run built.
func (t *Trace) objects(objs []client.Object) {
	if t == nil || len(t.Runs) == 0 {
		return
	}
	last := &t.Runs[len(t.Runs)-1]
	for _, o := range objs {
		last.Objects = append(last.Objects, o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName())
	}
}

// ByPoint returns the runs at one extension point.
func (t *Trace) ByPoint(point ExtensionPoint) []Run {
	var out []Run
	for _, r := range t.Runs {
		if r.Point == point {
			out = append(out, r)
		}
	}
	return out
}

type snapshot struct {
	labels, annotations       map[string]string
	podLabels, podAnnotations map[string]string
	policy                    RuntimePolicy
	template                  *jobsetv1alpha2.JobSetSpec
	counts                    []int32
	endpoints                 []bool
}

func snapshotOf(info *RuntimeInfo) snapshot {
	s := snapshot{
		labels: copyMap(info.Labels), annotations: copyMap(info.Annotations),
		podLabels: copyMap(info.Scheduler.PodLabels), podAnnotations: copyMap(info.Scheduler.PodAnnotations),
		template: info.Template.DeepCopy(),
	}
	if info.RuntimePolicy.MLPolicy != nil {
		s.policy.MLPolicy = info.RuntimePolicy.MLPolicy.DeepCopy()
	}
	if info.RuntimePolicy.PodGroupPolicy != nil {
		s.policy.PodGroupPolicy = info.RuntimePolicy.PodGroupPolicy.DeepCopy()
	}
	for _, ps := range info.PodSets {
		s.counts = append(s.counts, ps.Count)
		s.endpoints = append(s.endpoints, ps.Endpoints != nil)
	}
	return s
}

func diffInfo(a, b snapshot) []Change {
	var out []Change
	add := func(where, format string, args ...any) {
		out = append(out, Change{Where: where, What: fmt.Sprintf(format, args...)})
	}
	diffMap(a.labels, b.labels, func(k, v string) { add("JobSet", "label %s=%s", k, v) })
	diffMap(a.annotations, b.annotations, func(k, v string) { add("JobSet", "annotation %s=%s", k, v) })
	diffMap(a.podLabels, b.podLabels, func(k, v string) { add("every pod", "label %s=%s", k, v) })
	diffMap(a.podAnnotations, b.podAnnotations, func(k, v string) { add("every pod", "annotation %s=%s", k, v) })
	if !equality.Semantic.DeepEqual(a.policy, b.policy) {
		if mp, bp := a.policy.MLPolicy, b.policy.MLPolicy; mp != nil && bp != nil && mp.MPI != nil && bp.MPI != nil &&
			ptr.Deref(mp.MPI.NumProcPerNode, 0) != ptr.Deref(bp.MPI.NumProcPerNode, 0) {
			add("mlPolicy", "mpi.numProcPerNode %d → %d", ptr.Deref(mp.MPI.NumProcPerNode, 0), ptr.Deref(bp.MPI.NumProcPerNode, 0))
		} else {
			add("runtime policy", "changed")
		}
	}
	for i := range b.template.ReplicatedJobs {
		rb := &b.template.ReplicatedJobs[i]
		var ra *jobsetv1alpha2.ReplicatedJob
		if i < len(a.template.ReplicatedJobs) {
			ra = &a.template.ReplicatedJobs[i]
		}
		if ra == nil {
			add(rb.Name, "added replicated job")
			continue
		}
		if i < len(a.counts) && i < len(b.counts) && a.counts[i] != b.counts[i] {
			add(rb.Name, "pods %d → %d", a.counts[i], b.counts[i])
		}
		if i < len(b.endpoints) && b.endpoints[i] && !a.endpoints[i] {
			add(rb.Name, "endpoints set")
		}
		if !ptrEq(ra.Template.Spec.Parallelism, rb.Template.Spec.Parallelism) {
			add(rb.Name, "parallelism %s", intStr(rb.Template.Spec.Parallelism))
		}
		if !ptrEq(ra.Template.Spec.Completions, rb.Template.Spec.Completions) {
			add(rb.Name, "completions %s", intStr(rb.Template.Spec.Completions))
		}
		pa, pb := &ra.Template.Spec.Template.Spec, &rb.Template.Spec.Template.Spec
		for _, v := range pb.Volumes {
			if k := slices.IndexFunc(pa.Volumes, func(x corev1.Volume) bool { return x.Name == v.Name }); k < 0 {
				add(rb.Name, "+volume %s", v.Name)
			} else if !equality.Semantic.DeepEqual(pa.Volumes[k], v) {
				add(rb.Name, "~volume %s", v.Name)
			}
		}
		diffContainers(rb.Name, "init container", pa.InitContainers, pb.InitContainers, add)
		diffContainers(rb.Name, "container", pa.Containers, pb.Containers, add)
	}
	return out
}

func diffContainers(job, kind string, a, b []corev1.Container, add func(string, string, ...any)) {
	for _, cb := range b {
		where := job + "/" + cb.Name
		k := slices.IndexFunc(a, func(x corev1.Container) bool { return x.Name == cb.Name })
		if k < 0 {
			add(where, "+%s %s (image %s)", kind, cb.Name, cb.Image)
			continue
		}
		ca := a[k]
		if ca.Image != cb.Image {
			add(where, "image %s", cb.Image)
		}
		if !slices.Equal(ca.Command, cb.Command) {
			add(where, "command %s", strings.Join(cb.Command, " "))
		}
		if !slices.Equal(ca.Args, cb.Args) {
			add(where, "args %s", strings.Join(cb.Args, " "))
		}
		for _, e := range cb.Env {
			j := slices.IndexFunc(ca.Env, func(x corev1.EnvVar) bool { return x.Name == e.Name })
			if j < 0 || !equality.Semantic.DeepEqual(ca.Env[j], e) {
				add(where, "env %s=%s", e.Name, EnvValue(e))
			}
		}
		for _, p := range cb.Ports {
			if !slices.ContainsFunc(ca.Ports, func(x corev1.ContainerPort) bool { return x == p }) {
				add(where, "+port %d/%s", p.ContainerPort, ptr.Deref((*string)(&p.Protocol), "TCP"))
			}
		}
		for _, m := range cb.VolumeMounts {
			if !slices.ContainsFunc(ca.VolumeMounts, func(x corev1.VolumeMount) bool { return equality.Semantic.DeepEqual(x, m) }) {
				add(where, "+mount %s at %s", m.Name, m.MountPath)
			}
		}
		if !equality.Semantic.DeepEqual(ca.Resources, cb.Resources) {
			add(where, "resources changed")
		}
	}
}

// EnvValue renders an env var's value for people: the value, or where it
// comes from.
func EnvValue(e corev1.EnvVar) string {
	switch {
	case e.ValueFrom == nil:
		return e.Value
	case e.ValueFrom.FieldRef != nil:
		return "<field " + e.ValueFrom.FieldRef.FieldPath + ">"
	case e.ValueFrom.SecretKeyRef != nil:
		return "<secret " + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key + ">"
	case e.ValueFrom.ConfigMapKeyRef != nil:
		return "<configmap " + e.ValueFrom.ConfigMapKeyRef.Name + "/" + e.ValueFrom.ConfigMapKeyRef.Key + ">"
	default:
		return "<from elsewhere>"
	}
}

func diffMap(a, b map[string]string, fn func(k, v string)) {
	keys := make([]string, 0, len(b))
	for k := range b {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if v, ok := a[k]; !ok || v != b[k] {
			fn(k, b[k])
		}
	}
}

func ptrEq(a, b *int32) bool { return ptr.Deref(a, -1) == ptr.Deref(b, -1) }

func intStr(p *int32) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

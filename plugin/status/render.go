package status

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/failure"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// Render writes the one-screen status of s as it is at now.
func Render(w io.Writer, s *Summary, now time.Time, color bool) error {
	created := s.Created.Time
	since := func(t *metav1.Time) string {
		if t == nil {
			return ""
		}
		return printers.Delta(t.Sub(created))
	}
	head := printers.NewTable(w, "")
	head.Row("Name:", s.Name)
	head.Row("Namespace:", s.Namespace)
	head.Row("Runtime:", s.Runtime)
	head.Row("Created:", fmt.Sprintf("%s (%s ago)", printers.Timestamp(s.Created), printers.Age(s.Created, now)))
	if err := head.Flush(); err != nil {
		return err
	}
	// The stage line is not a table cell: only its reason comes from the cluster.
	fmt.Fprintf(w, "Stage:       %s\n", printers.Colorize(string(s.Stage), color)+printers.Escape(strings.TrimPrefix(s.StageLine(), string(s.Stage))))
	if b := s.BlockedByTaint; b != nil {
		fmt.Fprintf(w, "Hint:        %s\n", printers.Escape(b.WayOut))
	}
	if p := s.Progress; p != nil {
		fmt.Fprintf(w, "Progress:    %s\n", printers.Escape(withBar(p, progressText(p, s.Stage.Terminal()))+" (reported "+printers.Age(p.LastUpdated, now)+" ago)"))
	}
	if f := s.FirstFailure; f != nil {
		if err := renderFailure(w, f, since); err != nil {
			return err
		}
	}
	if wk := s.Worker; wk != nil {
		fmt.Fprintf(w, "Worker:      %s\n", printers.Escape(wk.Line()))
	}
	if q := s.Queue; q != nil {
		if err := renderQueue(w, q, since); err != nil {
			return err
		}
	}

	var pipeline [][]string
	for _, sp := range s.Stages {
		d := ""
		if sp.Duration != "" {
			dd, _ := time.ParseDuration(sp.Duration)
			d = printers.Duration(dd)
			if sp.End == nil && d != printers.None {
				d += " (running)"
			}
		}
		pipeline = append(pipeline, []string{string(sp.Name), since(sp.Start), since(sp.End), d})
	}
	var jobs [][]string
	for _, j := range s.Jobs {
		jobs = append(jobs, []string{j.Name, itoa(j.Ready), itoa(j.Active), itoa(j.Succeeded), itoa(j.Failed), itoa(j.Suspended), since(j.Start), since(j.End)})
	}
	var pods [][]string
	for _, p := range s.Pods {
		pods = append(pods, []string{p.Name, p.ReplicatedJob, p.Rank, p.Node, strconv.FormatInt(p.GPUs, 10), p.Status, itoa(p.Restarts), since(p.Started)})
	}
	var timeline [][]string
	for _, e := range s.Timeline {
		timeline = append(timeline, []string{printers.Clock(e.Time), since(&e.Time), e.What(), e.Reason, withCount(e.Message, e.Count)})
	}
	var warnings [][]string
	for _, e := range s.Warnings {
		warnings = append(warnings, []string{printers.Age(e.LastSeen, now), e.Object, e.Reason, withCount(e.Message, e.Count)})
	}
	for _, sec := range []struct {
		title   string
		headers []string
		rows    [][]string
	}{
		{"Pipeline", []string{"STAGE", "START", "END", "DURATION"}, pipeline},
		{"Jobs", []string{"REPLICATED JOB", "READY", "ACTIVE", "SUCCEEDED", "FAILED", "SUSPENDED", "START", "END"}, jobs},
		{"Pods", []string{"NAME", "STEP", "RANK", "NODE", "GPUS", "STATUS", "RESTARTS", "STARTED"}, pods},
		{"GPU claims", []string{"POD", "RESOURCECLAIM", "REQUESTS", "DEVICES"}, claimRows(s.Pods)},
		{"Timeline", []string{"TIME", "SINCE", "WHAT", "REASON", "MESSAGE"}, timeline},
		{"Recent warnings", []string{"LAST SEEN", "OBJECT", "REASON", "MESSAGE"}, warnings},
	} {
		if len(sec.rows) == 0 && (sec.title == "Recent warnings" || sec.title == "GPU claims") {
			continue // no news is good news; no DRA claims, no section
		}
		if err := section(w, sec.title, sec.headers, sec.rows); err != nil {
			return err
		}
	}
	return nil
}

// renderQueue writes what Kueue says of the TrainJob, one field a line, each value last on its line.
func renderQueue(w io.Writer, q *Queue, since func(*metav1.Time) string) error {
	fmt.Fprintf(w, "\nQueue:\n")
	t := printers.NewTable(w, "  ")
	t.Row("LocalQueue:", q.LocalQueue)
	if q.Note != "" && q.Workload == "" {
		if q.ClusterQueue != "" {
			t.Row("ClusterQueue:", q.ClusterQueue)
		}
		t.Row("Kueue:", q.Note)
		return t.Flush()
	}
	t.Row("ClusterQueue:", q.ClusterQueue)
	t.Row("Workload:", q.Workload)
	if q.Priority != nil {
		priority := strconv.Itoa(int(*q.Priority))
		if q.PriorityClass != "" {
			priority += " (" + q.PriorityClass + ")"
		}
		t.Row("Priority:", priority)
	}
	if q.Position != "" {
		t.Row("Position:", q.Position)
	}
	switch {
	case q.Admitted:
		t.Row("Admitted:", since(q.AdmittedAt))
	case !q.Active:
		t.Row("Admitted:", "no: stopped (spec.active=false)")
	default:
		t.Row("Admitted:", "no")
	}
	for _, pt := range q.Topology {
		t.Row("Topology:", topologyRequest(pt))
		if len(pt.Domains) > 0 {
			t.Row("Placed:", topologyPlaced(pt))
		}
	}
	for _, e := range q.Evictions {
		reason := e.Reason
		if e.By != "" {
			reason += " by " + e.By
		}
		t.Row("Evicted:", since(&e.Time)+" "+joinReason(reason, withCount(e.Message, e.Count)))
	}
	return t.Flush()
}

// topologyRequest says what a pod set asked of Kueue's topology-aware scheduling: "node in one rack
// (cloud.provider.com/topology-rack), required".
func topologyRequest(pt PodSetTopology) string {
	kind := "preferred"
	if pt.Required {
		kind = "required"
	}
	return fmt.Sprintf("%s in one %s (%s), %s", pt.PodSet, kueue.LevelName(pt.Level), pt.Level, kind)
}

// topologyPlaced says where Kueue put a pod set: "node in rack-1: gpu-node-2, gpu-node-3 (2 pods)", a domain
// after another; the nodes alone when their domains are unknown.
func topologyPlaced(pt PodSetTopology) string {
	var parts []string
	for _, d := range pt.Domains {
		where := strings.Join(d.Nodes, ", ")
		if d.Value != "" {
			where = d.Value + ": " + where
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", where, plural(int(d.Pods), "1 pod", fmt.Sprintf("%d pods", d.Pods))))
	}
	return pt.PodSet + " in " + strings.Join(parts, "; ")
}

// section writes a titled table, or <none> when it has no rows.
func section(w io.Writer, title string, headers []string, rows [][]string) error {
	fmt.Fprintf(w, "\n%s:\n", title)
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "  <none>")
		return err
	}
	t := printers.NewTable(w, "  ", headers...)
	for _, r := range rows {
		t.Row(r...)
	}
	return t.Flush()
}

// What names a timeline entry: "Created", a condition as Type=Status, or an Event's type; those of the
// TrainJob's Kueue Workload start with "Workload".
func (e TimelineEntry) What() string {
	switch e.Source {
	case SourceCondition:
		return e.Type + "=" + e.Status
	case SourceEvent:
		return "Event " + e.Type
	case SourceWorkloadCondition:
		return "Workload " + e.Type + "=" + e.Status
	case SourceWorkloadEvent:
		return "Workload Event " + e.Type
	}
	return e.Source
}

// progressText is the trainer's report: "45%, about 12m left, loss=1.27 tokens_per_sec=5100"; the time left
// only while the TrainJob runs.
func progressText(p *Progress, finished bool) string {
	var parts []string
	if p.Percentage != nil {
		parts = append(parts, fmt.Sprintf("%d%%", *p.Percentage))
	}
	if p.RemainingSeconds != nil && !finished {
		parts = append(parts, "about "+printers.Duration(time.Duration(*p.RemainingSeconds)*time.Second)+" left")
	}
	var metrics []string
	for _, m := range p.Metrics {
		metrics = append(metrics, m.Name+"="+m.Value)
	}
	if len(metrics) > 0 {
		parts = append(parts, strings.Join(metrics, " "))
	}
	return strings.Join(parts, ", ")
}

// barWidth is how many cells the progress bar has: 5% each.
const barWidth = 20

// withBar puts a progress bar before text when the trainer reports a percentage: "[#########-----------] 45%".
// The bar is ASCII so that it reads the same on any terminal and in a log file.
func withBar(p *Progress, text string) string {
	if p.Percentage == nil {
		return text
	}
	filled := int(min(max(*p.Percentage, 0), 100)) * barWidth / 100
	return "[" + strings.Repeat("#", filled) + strings.Repeat("-", barWidth-filled) + "] " + text
}

// renderFailure writes the first failure: where, how, what it used up, what the JobSet did, and the end of the
// container's log.
func renderFailure(w io.Writer, f *failure.Failure, since func(*metav1.Time) string) error {
	fmt.Fprintf(w, "\nFirst failure:\n")
	t := printers.NewTable(w, "  ")
	if f.Pod != "" {
		rj := f.ReplicatedJob
		if f.Rank != "" {
			rj += ", rank " + f.Rank
		}
		t.Row("Pod:", f.Pod)
		t.Row("Replicated job:", rj)
		t.Row("Node:", f.Node)
		if g := f.SickGPUs; g != nil {
			t.Row("Sick GPUs:", printers.Escape(strings.Join(g.Signs, "; ")))
		}
		t.Row("Container:", f.Container)
	} else {
		t.Row("Job:", f.Job)
		t.Row("Replicated job:", f.ReplicatedJob)
	}
	t.Row("Failed:", strings.TrimSpace(since(f.Time)+" "+f.Text()))
	t.Row("Restarts:", restartsText(f))
	if p := f.Policy; p != nil {
		t.Row("Failure policy:", policyText(p, f.MaxRestarts))
	}
	if f.LogUnavailable != "" {
		t.Row("Log:", "none: "+f.LogUnavailable)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if len(f.Log) == 0 {
		return nil
	}
	of := ""
	if f.Previous {
		of = " of the previous instance"
	}
	fmt.Fprintf(w, "  Log (last %d lines%s):\n", failure.LogLines, of)
	for _, l := range f.Log {
		fmt.Fprintf(w, "    %s\n", printers.Escape(l))
	}
	return nil
}

// restartsText is how many retries the failure used: the container's restarts, its Job's failures of
// backoffLimit, the JobSet's restarts of maxRestarts.
func restartsText(f *failure.Failure) string {
	var parts []string
	if f.Pod != "" {
		parts = append(parts, fmt.Sprintf("container %d", f.Restarts))
	}
	if b := f.BackoffLimit; b != nil {
		parts = append(parts, fmt.Sprintf("Job %s %d of backoffLimit %d", f.Job, b.Used, b.Limit))
	}
	if b := f.MaxRestarts; b != nil {
		parts = append(parts, fmt.Sprintf("JobSet %d of maxRestarts %d", b.Used, b.Limit))
	}
	return strings.Join(parts, ", ")
}

// policyText says what the JobSet's failure policy did: the action, why (a rule, or the default), for which
// Job, and what came of it.
func policyText(p *failure.Policy, maxRestarts *failure.Budget) string {
	why := "rule " + p.Rule
	switch {
	case p.NoFailurePolicy:
		why = "no failurePolicy"
	case p.Rule == "":
		why = "no rule matched"
	}
	text := fmt.Sprintf("%s (%s) after Job %s failed", p.Action, why, p.Job)
	if p.JobFailureReason != "" {
		text += " (" + p.JobFailureReason + ")"
	}
	switch action := jobsetv1alpha2.FailurePolicyAction(p.Action); {
	case p.FailsJobSet(maxRestarts) && action != jobsetv1alpha2.FailJobSet:
		return text + ": maxRestarts used up, the JobSet fails"
	case p.FailsJobSet(maxRestarts):
		return text + ": the JobSet fails"
	case action == jobsetv1alpha2.RestartJob || action == jobsetv1alpha2.RestartJobAndIgnoreMaxRestarts:
		return text + ": the Job is created again"
	}
	return text + ": every Job is created again"
}

func withCount(msg string, n int32) string {
	if n > 1 {
		return fmt.Sprintf("%s (x%d)", msg, n)
	}
	return msg
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

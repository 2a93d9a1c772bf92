package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The knobs a pod turns to steer its simulated containers. KWOK sees only the pod object, so they are
// environment variables of the pod's containers (TrainJob users control env; the first value found in any
// container applies to all of the pod's containers) or, for restarts, a pod annotation too.
const (
	// EnvRunSeconds is how long the containers run before they exit: seconds ("30", "0.5") or a Go duration
	// ("2m"). Default Options.PodRunDuration.
	EnvRunSeconds = "SIM_RUN_SECONDS"
	// EnvExitCode is the containers' exit code when their run time ends. Non-zero: under restartPolicy Never the
	// pod ends Failed; under OnFailure or Always the containers restart (restartCount+1) and run again, as a kubelet
	// would, until the Job controller gives up (backoffLimit). Default 0.
	EnvExitCode = "SIM_EXIT_CODE"
	// EnvExitReason is the reason of a non-zero exit (state.terminated.reason, lastState.terminated.reason):
	// OOMKilled with exit code 137 is the kernel's OOM killer. Default Error.
	EnvExitReason = "SIM_EXIT_REASON"
	// EnvRestarts is how many times the containers crash (exit code SIM_EXIT_CODE, else 1) and are restarted
	// before they exit for good, whatever the restartPolicy. Default 0.
	EnvRestarts = "SIM_RESTARTS"
	// EnvBackoffSeconds makes a crash loop: after each crash the containers wait in CrashLoopBackOff (the pod
	// not ready) this long before they run again, as a kubelet's back-off (which doubles; this one does not).
	// Seconds or a Go duration. Default: they run again at once.
	EnvBackoffSeconds = "SIM_BACKOFF_SECONDS"
	// EnvImagePullError, when set, makes the containers' image impossible to pull: the pod stays Pending, its
	// containers waiting in ErrImagePull, then ImagePullBackOff, with the message a kubelet writes.
	EnvImagePullError = "SIM_IMAGE_PULL_ERROR"
	// EnvEvict, when set, has the kubelet evict the pod when its run time ends, for memory pressure: phase
	// Failed, reason Evicted, a DisruptionTarget condition, its containers killed (exit code 137).
	EnvEvict = "SIM_EVICT"
	// EnvIndexes limits the knobs above (except the run time) to the pods of these completion indexes
	// ("1", "0,3"); the other pods run normally. Default: every pod.
	EnvIndexes = "SIM_INDEXES"
	// RestartsAnnotation on a pod restarts its containers at once until their restartCount reaches its value;
	// it may be set on a running pod (`kubectl annotate pod p kwok.trainjob.dev/restarts=1`).
	RestartsAnnotation = "kwok.trainjob.dev/restarts"
)

// simDefsJQ are the jq definitions the decisions below share: a knob's value, a number, and whether the knobs
// apply to this pod (SIM_INDEXES).
const simDefsJQ = `def env($name): first(.spec.containers[].env[]? | select(.name == $name and (.value // "") != "") | .value);
def num(f): [f | tonumber?] | first // 0;
def selected: (env("` + EnvIndexes + `") // "") as $ix
  | $ix == "" or ((.metadata.labels["batch.kubernetes.io/job-completion-index"] // "") as $i | $ix | split(",") | any(.[]; gsub(" "; "") == $i));
`

// podActionJQ decides what a running pod's containers do next: "back-off-end" (a container waits in
// CrashLoopBackOff: run it again after the back-off), "restart-now" (the restarts annotation asks for more
// restarts than happened), or when their run time ends "evict", "restart", "fail", "succeed", or "run" (keep
// running: a restartPolicy Always pod that exits 0 is a server).
const podActionJQ = simDefsJQ + `selected as $sel
| (if $sel then num(env("` + EnvExitCode + `")) else 0 end) as $exit
| (if $sel then num(env("` + EnvRestarts + `")) else 0 end) as $crashes
| num(.metadata.annotations["` + RestartsAnnotation + `"]) as $requested
| ([.status.containerStatuses[]?.restartCount // 0] | max // 0) as $count
| if any(.status.containerStatuses[]?; .state.waiting.reason == "CrashLoopBackOff") then "back-off-end"
  elif $count < $requested then "restart-now"
  elif $sel and (env("` + EnvEvict + `") // "") != "" then "evict"
  elif $count < $crashes then "restart"
  elif $exit != 0 then (if .spec.restartPolicy == "Never" then "fail" else "restart" end)
  elif .spec.restartPolicy == "Always" then "run"
  else "succeed" end`

// podStartJQ decides how a scheduled pod starts: "run"; or, when its image cannot be pulled (SIM_IMAGE_PULL_ERROR),
// "pull-error" (ErrImagePull), then "pull-back-off" (ImagePullBackOff), where it stays ("pull-waiting").
const podStartJQ = simDefsJQ + `if selected and (env("` + EnvImagePullError + `") // "") != "" then
  ([.status.containerStatuses[]?.state.waiting.reason // ""] | first // "") as $w
  | if $w == "ErrImagePull" then "pull-back-off" elif $w == "ImagePullBackOff" then "pull-waiting" else "pull-error" end
else "run" end`

// durationJQ is the duration the knob name of a pod asks for, as a Go duration; nothing if it asks for none.
func durationJQ(name string) string {
	return `first(.spec.containers[].env[]? | select(.name == "` + name + `" and (.value // "") != "") | .value)
| if test("^[0-9]+([.][0-9]+)?$") then . + "s" else . end`
}

// kwokConfig is KWOK's --config: the stages (manifests/kwok-stages.yaml with the run time filled in) and a
// ClusterLogs that gives every pod without a Logs object of its own some log lines.
func (c *Cluster) kwokConfig() ([]byte, error) {
	stages, err := manifests.ReadFile("manifests/kwok-stages.yaml")
	if err != nil {
		return nil, err
	}
	quote := func(s string) string {
		b, _ := json.Marshal(s) // a JSON string is a YAML double-quoted scalar
		return string(b)
	}
	config := strings.NewReplacer(
		"${POD_ACTION}", quote(podActionJQ),
		"${POD_START}", quote(podStartJQ),
		"${RUN_DURATION_FROM}", quote(durationJQ(EnvRunSeconds)),
		"${BACKOFF_DURATION_FROM}", quote(durationJQ(EnvBackoffSeconds)),
		"${RUN_DURATION_MS}", strconv.FormatInt(c.opts.PodRunDuration.Milliseconds(), 10),
	).Replace(string(stages))

	current, previous, err := c.writeDefaultPodLogs()
	if err != nil {
		return nil, err
	}
	config += fmt.Sprintf(`---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: trainjob-default
spec:
  selector: {}
  logs:
  - logsFile: %s
    previousLogsFile: %s
`, quote(current), quote(previous))
	return []byte(config), nil
}

// writeDefaultPodLogs writes the log files every simulated container shows until a test writes its own.
func (c *Cluster) writeDefaultPodLogs() (current, previous string, err error) {
	dir := filepath.Join(c.Dir, "pods")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	current, previous = filepath.Join(dir, "default.log"), filepath.Join(dir, "default.previous.log")
	if err := os.WriteFile(current, criLines("simulated container started (KWOK); this pod has no log lines of its own"), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(previous, criLines("simulated container, previous run (KWOK)"), 0o644); err != nil {
		return "", "", err
	}
	return current, previous, nil
}

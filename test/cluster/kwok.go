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
	// EnvRestarts is how many times the containers crash (exit code SIM_EXIT_CODE, else 1) and are restarted
	// before they exit for good, whatever the restartPolicy. Default 0.
	EnvRestarts = "SIM_RESTARTS"
	// RestartsAnnotation on a pod restarts its containers at once until their restartCount reaches its value;
	// it may be set on a running pod (`kubectl annotate pod p kwok.trainjob.dev/restarts=1`).
	RestartsAnnotation = "kwok.trainjob.dev/restarts"
)

// podActionJQ decides what a running pod's containers do next: "restart-now" (the restarts annotation asks
// for more restarts than happened), or when their run time ends "restart", "fail", "succeed", or "run" (keep
// running: a restartPolicy Always pod that exits 0 is a server).
const podActionJQ = `def env($name): first(.spec.containers[].env[]? | select(.name == $name and (.value // "") != "") | .value);
def num(f): [f | tonumber?] | first // 0;
num(env("` + EnvExitCode + `")) as $exit
| num(env("` + EnvRestarts + `")) as $crashes
| num(.metadata.annotations["` + RestartsAnnotation + `"]) as $requested
| ([.status.containerStatuses[]?.restartCount // 0] | max // 0) as $count
| if $count < $requested then "restart-now"
  elif $count < $crashes then "restart"
  elif $exit != 0 then (if .spec.restartPolicy == "Never" then "fail" else "restart" end)
  elif .spec.restartPolicy == "Always" then "run"
  else "succeed" end`

// runDurationJQ is the run time a pod asks for, as a Go duration; nothing if it asks for none.
const runDurationJQ = `first(.spec.containers[].env[]? | select(.name == "` + EnvRunSeconds + `" and (.value // "") != "") | .value)
| if test("^[0-9]+([.][0-9]+)?$") then . + "s" else . end`

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
		"${RUN_DURATION_FROM}", quote(runDurationJQ),
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

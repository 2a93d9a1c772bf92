package flux

import (
	_ "embed"
	"fmt"
	"strings"
	"text/template"
)

// The scripts the ConfigMap carries and the broker configuration init.sh
// writes. They follow upstream Trainer's, which the Flux view images are
// made for; entrypoint.sh also exits with the job's status, where
// upstream's always exits 0 and so hides a failed job.
var (
	//go:embed templates/entrypoint.sh
	entrypointText string
	//go:embed templates/init.sh
	initText string
	//go:embed templates/broker.toml
	brokerText string

	entrypointTemplate = template.Must(template.New(entrypointKey).Option("missingkey=error").Parse(entrypointText))
	initTemplate       = template.Must(template.New(initKey).Option("missingkey=error").Parse(initText))
	brokerTemplate     = template.Must(template.New("broker.toml").Option("missingkey=error").Parse(brokerText))
)

// scriptParams are what the scripts depend on.
type scriptParams struct {
	jobName string
	// domain is the pods' DNS domain: <subdomain>.<namespace>.svc.cluster.local.
	domain string
	nodes  int32
	// tasks is the number of tasks per node; gpus the GPUs of one node.
	tasks    int32
	gpus     int64
	settings settings
}

type scripts struct{ entrypoint, init string }

func renderScripts(p scriptParams) (scripts, error) {
	hosts := hostlist(p.jobName, p.nodes)
	resources, flags := fluxResources(p.nodes, p.tasks, p.gpus)
	broker, err := execute(brokerTemplate, map[string]string{
		"NetworkDevice": p.settings.networkDevice,
		"Domain":        p.domain,
		"Hosts":         hosts,
		"QueuePolicy":   p.settings.queuePolicy,
	})
	if err != nil {
		return scripts{}, err
	}
	var out scripts
	if out.init, err = execute(initTemplate, map[string]string{"Hosts": hosts, "BrokerConfig": broker}); err != nil {
		return scripts{}, err
	}
	out.entrypoint, err = execute(entrypointTemplate, map[string]string{
		"Resources": resources,
		"MainHost":  p.jobName + "-node-0-0",
		"Flags":     flags,
	})
	return out, err
}

// fluxResources are the arguments of `flux R encode` (the cores and GPUs
// of one node) and of `flux run` (nodes, tasks, GPUs per task).
func fluxResources(nodes, tasks int32, gpus int64) (resources, flags string) {
	resources = "--cores=" + indexRange(0, int64(tasks))
	flags = fmt.Sprintf("-N %d -n %d", nodes, int64(tasks)*int64(nodes))
	if gpus > 0 {
		resources += " --gpu=" + indexRange(0, gpus)
		// `flux run -g` is GPUs per task. Upstream passes those of a node,
		// which cannot be scheduled once a node runs several tasks.
		if perTask := gpus / int64(max(tasks, 1)); perTask > 0 {
			flags += fmt.Sprintf(" -g %d", perTask)
		}
	}
	return resources, flags
}

func execute(t *template.Template, data map[string]string) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("render %s: %w", t.Name(), err)
	}
	return b.String(), nil
}

// hostlist names the `node` pods of the first replica in Flux's hostlist
// syntax: <job>-node-0-[0-3] for four pods.
func hostlist(jobName string, nodes int32) string {
	return fmt.Sprintf("%s-node-0-[%s]", jobName, indexRange(0, int64(nodes)))
}

// indexRange is the range of n indexes from start in Flux's idset syntax:
// "3" for one, "0-3" for four.
func indexRange(start, n int64) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d-%d", start, start+n-1)
}

package pipeline

import (
	"iter"
	"strconv"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// Subdomain is the pods' DNS subdomain: the JobSet's network.subdomain, or
// the TrainJob's name, as the JobSet plugin defaults it (the name of the
// headless Service JobSet makes).
func (i *RuntimeInfo) Subdomain(trainJob *trainer.TrainJob) string {
	if i.Template != nil {
		if n := i.Template.Network; n != nil && n.Subdomain != "" {
			return n.Subdomain
		}
	}
	return trainJob.Name
}

// FirstEndpoint is the DNS name of the first pod of the replicated job
// rjob, the rank-zero host of the ML policies (torch master, JAX
// coordinator, XGBoost tracker): `<job>-<rjob>-0-0.<subdomain>`. Upstream
// Trainer writes `<job>-node-0-0.<job>` whatever the runtime, which is the
// same name for a runtime without a subdomain whose trainer job is `node`,
// as the shipped ones are.
func (i *RuntimeInfo) FirstEndpoint(trainJob *trainer.TrainJob, rjob string) string {
	return trainJob.Name + "-" + rjob + "-0-0." + i.Subdomain(trainJob)
}

// Endpoints yields `<job>-<rjob>-<replica>-<index>.<subdomain>`, the DNS
// name of every pod of every replica of a replicated job, computing each
// name only when it is asked for: a thousand-node job costs nothing until
// a plugin (MPI's hostfile) reads it.
func Endpoints(job, rjob string, replicas, count int32, subdomain string) iter.Seq[string] {
	return func(yield func(string) bool) {
		prefix := job + "-" + rjob + "-"
		buf := make([]byte, 0, len(prefix)+len(subdomain)+24)
		for r := range replicas {
			for i := range count {
				buf = append(buf[:0], prefix...)
				buf = strconv.AppendInt(buf, int64(r), 10)
				buf = append(buf, '-')
				buf = strconv.AppendInt(buf, int64(i), 10)
				buf = append(buf, '.')
				buf = append(buf, subdomain...)
				if !yield(string(buf)) {
					return
				}
			}
		}
	}
}

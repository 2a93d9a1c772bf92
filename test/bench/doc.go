// Command bench measures the product against the floor the API server allows and against kubectl, for
// `make bench` (issue "Performance"):
//
//  1. Throughput: on the local cluster's api profile with the JobSet controller and its webhooks, the time
//     from the first create until N JobSets exist, (A) creating N TrainJobs that the operator turns into
//     JobSets versus (B) creating the same N JobSets directly and (C) creating N TrainJobs the operator
//     leaves alone and writing for each what the operator would (the floor: an operator that cost nothing),
//     with one client setting for every client; a warm-up, then A B C C B A on fresh namespaces, each round
//     starting from a quiet cluster, repeated. The operator's writes per TrainJob come from the API
//     server's audit log filtered by its ServiceAccount user, its failed reconciles from its metrics.
//  2. Memory: the operator's anonymous and file-backed RSS (/proc/<pid>/status) and Go heap (its metrics)
//     idle, with TrainJobs, after large unrelated ConfigMaps appear, and after a restart with all of that
//     present; `go tool pprof -top` of its heap. The targets are on what the operator owns (anonymous RSS);
//     the file-backed part is the executable's pages in the shared page cache, reported only.
//  3. CLI: wall time of `kubectl-trainjob list` and `status` against `kubectl get trainjobs`, and the API
//     requests each makes (audit log, by the CLI's own ServiceAccount user).
//  4. The Build phase micro-benchmark (go test -bench BuildTorch).
//
// The operator is the real kubectl-trainjob binary running as a child process with its Deployment's
// arguments and ServiceAccount (test/stack). Knobs are environment variables (see knobs.go); the output is
// a table on stdout and a JSON summary with every target of the issue, its value and whether it is met.
package main

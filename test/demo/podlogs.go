package main

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// logLineEvery is the pace of the demo's made-up training logs.
const logLineEvery = 1500 * time.Millisecond

// writeTrainingLogs gives the simulated pods of a TrainJob logs that look like the real ones, so that
// `kubectl trainjob logs` has something to show: KWOK runs no container, so each pod otherwise has one line
// saying so. It runs until ctx ends; a pod gets its lines while it runs.
func writeTrainingLogs(ctx context.Context, c *cluster.Cluster, namespace, name string) {
	started := map[string]bool{}
	_ = wait.PollUntilContextCancel(ctx, 300*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Clientset().CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: jobsetv1alpha2.JobSetNameKey + "=" + name})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if started[p.Name] || p.Status.Phase != corev1.PodRunning {
				continue
			}
			started[p.Name] = true
			go writePodLines(ctx, c, &p)
		}
		return false, nil
	})
}

// writePodLines writes the lines of one pod, one every logLineEvery, as long as it runs.
func writePodLines(ctx context.Context, c *cluster.Cluster, p *corev1.Pod) {
	rank := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	var container string
	var lines []string
	switch p.Labels[jobsetv1alpha2.ReplicatedJobNameKey] {
	case trainer.DatasetInitializerName:
		container = trainer.DatasetInitializerName
		lines = []string{
			"Downloading dataset hf://tatsu-lab/alpaca to /workspace/dataset",
			"Fetched data/train-00000-of-00001.parquet (24.2 MB)",
			"Dataset ready: 52002 rows",
		}
	case trainer.Node:
		container = trainer.Node
		lines = []string{fmt.Sprintf("[rank %s] torchrun: node %s of 4, 8 processes (one per GPU), master demo-node-0-0.demo:29500", rank, rank)}
		for epoch, loss := range []float64{2.31, 1.74, 1.22} {
			lines = append(lines, fmt.Sprintf("[rank %s] epoch %d/3  loss %.2f  (52002 samples)", rank, epoch+1, loss))
		}
		lines = append(lines, fmt.Sprintf("[rank %s] training complete; checkpoint saved to /workspace/output", rank))
	default:
		return
	}
	for i, line := range lines {
		if i > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(logLineEvery):
			}
		}
		if err := c.WritePodLog(ctx, p.Namespace, p.Name, container, line); err != nil {
			return // the pod is gone or has ended
		}
	}
}

package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
)

// kwokLogsGVR is KWOK's Logs resource: which files hold the logs of one pod's containers.
var kwokLogsGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}

// logsServedTimeout bounds the wait for KWOK to serve a pod's logs from the files of a new Logs object.
const logsServedTimeout = 10 * time.Second

// WritePodLog appends lines to the stdout of a container of a simulated pod (full profile), so that
// `kubectl logs` and client-go's GetLogs return them; lines written later show up in a follow stream. On the
// first write to a pod it gives the pod log files of its own and, if the pod is on a node, waits until KWOK
// serves them.
func (c *Cluster) WritePodLog(ctx context.Context, namespace, pod, container string, lines ...string) error {
	c.podLogsMu.Lock()
	defer c.podLogsMu.Unlock()
	p, err := c.podWithContainer(ctx, namespace, pod, container)
	if err != nil {
		return err
	}
	created, err := c.ensurePodLogs(ctx, p)
	if err != nil {
		return err
	}
	current, _ := c.podLogFiles(p, container)
	f, err := os.OpenFile(current, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(criLines(lines...)); err != nil {
		return fmt.Errorf("write log of %s/%s container %s: %w", namespace, pod, container, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if created {
		return c.waitLogsServed(ctx, p, container)
	}
	return nil
}

// RestartContainer simulates a restart of a container of a running simulated pod (full profile): the log so
// far becomes what `kubectl logs --previous` shows, a new empty log begins, and the container's status gets
// restartCount+1, lastState terminated with exitCode, and a new running state. The pod then runs for its run
// time again. A follow stream opened before the restart keeps the old run's file, as a kubelet ends it.
func (c *Cluster) RestartContainer(ctx context.Context, namespace, pod, container string, exitCode int32) error {
	c.podLogsMu.Lock()
	defer c.podLogsMu.Unlock()
	p, err := c.podWithContainer(ctx, namespace, pod, container)
	if err != nil {
		return err
	}
	created, err := c.ensurePodLogs(ctx, p)
	if err != nil {
		return err
	}
	current, previous := c.podLogFiles(p, container)
	if err := os.Rename(current, previous); err != nil {
		return err
	}
	if err := os.WriteFile(current, nil, 0o644); err != nil {
		return err
	}

	pods := c.client.CoreV1().Pods(namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := containerStatus(p, container)
		if st == nil || st.State.Running == nil {
			return fmt.Errorf("container %s of pod %s/%s is not running", container, namespace, pod)
		}
		now := metav1.Now()
		reason := "Error"
		if exitCode == 0 {
			reason = "Completed"
		}
		st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: exitCode, Reason: reason, StartedAt: st.State.Running.StartedAt, FinishedAt: now,
		}}
		st.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
		st.RestartCount++
		_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("restart container %s of pod %s/%s: %w", container, namespace, pod, err)
	}
	if created {
		return c.waitLogsServed(ctx, p, container)
	}
	return nil
}

func (c *Cluster) podWithContainer(ctx context.Context, namespace, pod, container string) (*corev1.Pod, error) {
	if c.Profile != ProfileFull {
		return nil, fmt.Errorf("simulated pods need the %s profile", ProfileFull)
	}
	p, err := c.client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	for _, ctr := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		if ctr.Name == container {
			return p, nil
		}
	}
	return nil, fmt.Errorf("pod %s/%s has no container %s", namespace, pod, container)
}

func containerStatus(p *corev1.Pod, container string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == container {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// podLogFiles are the current and previous log files of a container of one pod (by UID, so that a pod
// recreated under the same name starts afresh).
func (c *Cluster) podLogFiles(p *corev1.Pod, container string) (current, previous string) {
	dir := filepath.Join(c.Dir, "pods", string(p.UID))
	return filepath.Join(dir, container+".log"), filepath.Join(dir, container+".previous.log")
}

// ensurePodLogs makes sure a Logs object points KWOK at this pod's own files for every container (KWOK answers
// 400 for a container its Logs object does not list). It reports whether it created or replaced the object.
// The object is owned by the pod, so it goes when the pod goes.
func (c *Cluster) ensurePodLogs(ctx context.Context, p *corev1.Pod) (bool, error) {
	var logs []any
	for _, ctr := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		current, previous := c.podLogFiles(p, ctr.Name)
		for _, f := range []string{current, previous} {
			if err := touch(f); err != nil {
				return false, err
			}
		}
		logs = append(logs, map[string]any{"containers": []any{ctr.Name}, "logsFile": current, "previousLogsFile": previous})
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "Logs",
		"metadata": map[string]any{
			"name":      p.Name,
			"namespace": p.Namespace,
			"ownerReferences": []any{map[string]any{
				"apiVersion": "v1", "kind": "Pod", "name": p.Name, "uid": string(p.UID),
			}},
		},
		"spec": map[string]any{"logs": logs},
	}}
	client, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return false, err
	}
	res := client.Resource(kwokLogsGVR).Namespace(p.Namespace)
	existing, err := res.Get(ctx, p.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = res.Create(ctx, obj, metav1.CreateOptions{})
		return err == nil, err
	case err != nil:
		return false, err
	}
	if owners := existing.GetOwnerReferences(); len(owners) == 1 && owners[0].UID == p.UID {
		return false, nil
	}
	// Left over from an earlier pod of the same name.
	obj.SetResourceVersion(existing.GetResourceVersion())
	_, err = res.Update(ctx, obj, metav1.UpdateOptions{})
	return err == nil, err
}

// waitLogsServed waits until KWOK answers a container's logs from the pod's own file rather than the default.
func (c *Cluster) waitLogsServed(ctx context.Context, p *corev1.Pod, container string) error {
	if p.Spec.NodeName == "" {
		return nil // not on a node yet: nothing serves its logs, and KWOK will have seen the Logs object by then
	}
	current, _ := c.podLogFiles(p, container)
	data, err := os.ReadFile(current)
	if err != nil {
		return err
	}
	want := criMessages(data)
	req := c.client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container})
	return waitUntil(ctx, logsServedTimeout, fmt.Sprintf("KWOK to serve the logs of %s/%s container %s", p.Namespace, p.Name, container), nil,
		func(ctx context.Context) (bool, error) {
			got, err := req.DoRaw(ctx)
			return err == nil && string(got) == want, err
		})
}

// criLines formats lines as a container runtime writes a container's stdout: "<RFC3339Nano> stdout F <line>".
func criLines(lines ...string) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		for part := range strings.SplitSeq(strings.TrimSuffix(l, "\n"), "\n") {
			fmt.Fprintf(&b, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), part)
		}
	}
	return b.Bytes()
}

// criMessages is what `kubectl logs` shows of a CRI log: the message of every line.
func criMessages(data []byte) string {
	var b strings.Builder
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		if f := strings.SplitN(s.Text(), " ", 4); len(f) == 4 {
			b.WriteString(f[3] + "\n")
		}
	}
	return b.String()
}

func touch(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

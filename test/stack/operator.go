package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/webhook"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// operatorContainer is the name of the Deployment's container that runs the operator.
const operatorContainer = "operator"

// operatorStopTimeout is how long the operator may take to exit after SIGTERM; the Deployment's
// terminationGracePeriodSeconds when it sets one.
const operatorStopTimeout = 10 * time.Second

// Operator is the operator's Deployment running as a child process.
type Operator struct {
	// Args are its command line (the binary first).
	Args []string
	// Config is the configuration it was given (the Deployment's ConfigMap with local addresses and folders).
	Config *config.Configuration
	// LogPath is the file its standard output and error go to.
	LogPath string
	// MetricsToken is a bearer token that may scrape its /metrics (ClusterRole kubectl-trainjob-metrics-reader).
	MetricsToken string

	env         []string
	cmd         *exec.Cmd
	stopTimeout time.Duration
	done        chan struct{}
	err         error
}

// deploymentPod is what a Deployment of the manifests runs: its namespace, pod spec and container.
type deploymentPod struct {
	namespace string
	spec      corev1.PodSpec
	container corev1.Container
}

// operatorDeployment finds the operator's Deployment among objs.
func operatorDeployment(objs []*unstructured.Unstructured) (*deploymentPod, error) {
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
			return nil, fmt.Errorf("Deployment %s: %w", u.GetName(), err)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == operatorContainer {
				return &deploymentPod{namespace: d.Namespace, spec: d.Spec.Template.Spec, container: c}, nil
			}
		}
	}
	return nil, fmt.Errorf("no Deployment with a container %q in %s", operatorContainer, kustomizationDir)
}

// localPod maps the pod's volumes to folders under dir, so that the container's paths can be found on this
// machine: ConfigMap volumes get the ConfigMap's files, emptyDirs an empty folder (emptied, as a new pod's
// would be, when a previous run left it).
type localPod struct {
	dir    string
	mounts []corev1.VolumeMount
}

func newLocalPod(dir string, pod *deploymentPod, objs []*unstructured.Unstructured) (*localPod, error) {
	lp := &localPod{dir: dir, mounts: pod.container.VolumeMounts}
	for _, m := range pod.container.VolumeMounts {
		local := lp.path(m.MountPath)
		if err := os.RemoveAll(local); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(local, 0o700); err != nil {
			return nil, err
		}
		i := slices.IndexFunc(pod.spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			return nil, fmt.Errorf("volume mount %s names no volume", m.Name)
		}
		cm := pod.spec.Volumes[i].ConfigMap
		if cm == nil {
			continue
		}
		data, err := configMapData(objs, pod.namespace, cm.Name)
		if err != nil {
			return nil, err
		}
		for name, content := range data {
			if err := os.WriteFile(filepath.Join(local, name), []byte(content), 0o600); err != nil {
				return nil, err
			}
		}
	}
	return lp, nil
}

// path is where a path of the container is on this machine: under dir when a volume is mounted there,
// unchanged otherwise.
func (lp *localPod) path(p string) string {
	best := ""
	for _, m := range lp.mounts {
		mp := filepath.Clean(m.MountPath)
		if (p == mp || strings.HasPrefix(p, mp+"/")) && len(mp) > len(best) {
			best = mp
		}
	}
	if best == "" {
		return p
	}
	return filepath.Join(lp.dir, "volumes", best, strings.TrimPrefix(p, best))
}

// arg rewrites the paths in a --flag=PATH argument.
func (lp *localPod) arg(a string) string {
	if name, value, ok := strings.Cut(a, "="); ok && strings.HasPrefix(name, "-") && filepath.IsAbs(value) {
		return name + "=" + lp.path(value)
	}
	return a
}

func configMapData(objs []*unstructured.Unstructured, namespace, name string) (map[string]string, error) {
	for _, u := range objs {
		if u.GetKind() == "ConfigMap" && u.GetNamespace() == namespace && u.GetName() == name {
			data, _, err := unstructured.NestedStringMap(u.Object, "data")
			return data, err
		}
	}
	return nil, fmt.Errorf("ConfigMap %s/%s is not in %s", namespace, name, kustomizationDir)
}

// localConfig is the operator's configuration file as the pod would read it, with what a pod gets from its
// own network namespace and filesystem replaced: its servers on 127.0.0.1 (webhooks, metrics and probes on
// ports.webhook, .metrics and .health), the certificate folder on this machine, and a serving certificate
// also valid for "localhost", the host of the webhooks' URLs.
func localConfig(lp *localPod, pod *deploymentPod, ports operatorPorts) (*config.Configuration, error) {
	var path string
	for _, a := range pod.container.Args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			path = lp.path(v)
		}
	}
	if path == "" {
		return nil, errors.New("the operator's container has no --config=FILE argument")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if cfg.Metrics.BindAddress != "0" {
		cfg.Metrics.BindAddress = "127.0.0.1:" + strconv.Itoa(ports.metrics)
	}
	if cfg.Health.HealthProbeBindAddress == "0" {
		return nil, errors.New("the operator's configuration turns its probes off: nothing could tell when it is ready")
	}
	cfg.Health.HealthProbeBindAddress = "127.0.0.1:" + strconv.Itoa(ports.health)
	cfg.Webhook.Host = "127.0.0.1"
	cfg.Webhook.Port = ptr.To(int32(ports.webhook))
	if cfg.Webhook.CertDir == "" {
		return nil, errors.New("the operator's configuration sets no webhook.certDir")
	}
	cfg.Webhook.CertDir = lp.path(cfg.Webhook.CertDir)
	cfg.CertManagement.ExtraDNSNames = append(cfg.CertManagement.ExtraDNSNames, "localhost")
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return cfg, os.WriteFile(path, out, 0o600)
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the pod's ServiceAccount, so the
// operator has exactly the permissions config/rbac grants it.
func serviceAccountKubeconfig(ctx context.Context, cfg *rest.Config, pod *deploymentPod, path string) error {
	sa := pod.spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return ServiceAccountKubeconfig(ctx, cfg, pod.namespace, sa, path)
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as ServiceAccount namespace/name with a
// token from the TokenRequest API (asked for with cfg), its namespace the context's.
func ServiceAccountKubeconfig(ctx context.Context, cfg *rest.Config, namespace, name, path string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	token, err := cluster.ServiceAccountToken(ctx, cs, namespace, name)
	if err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name, Namespace: namespace}
	kc.CurrentContext = name
	return clientcmd.WriteToFile(*kc, path)
}

// startOperator runs the Deployment's container: binary with the container's arguments (paths mapped to
// this machine), --kubeconfig of its ServiceAccount and extraArgs, the container's environment (POD_NAMESPACE
// from the downward API), output to logPath.
func startOperator(binary string, pod *deploymentPod, lp *localPod, kubeconfig, logPath string, cfg *config.Configuration, extraArgs []string) (*Operator, error) {
	args := []string{binary}
	for _, a := range pod.container.Args {
		args = append(args, lp.arg(a))
	}
	args = append(args, "--kubeconfig="+kubeconfig)
	args = append(args, extraArgs...)
	env := os.Environ()
	for _, e := range pod.container.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+pod.namespace)
		}
	}
	o := &Operator{Args: args, Config: cfg, LogPath: logPath, env: env, stopTimeout: operatorStopTimeout}
	if g := pod.spec.TerminationGracePeriodSeconds; g != nil {
		o.stopTimeout = time.Duration(*g) * time.Second
	}
	return o, o.run(os.O_TRUNC)
}

// rerun starts a stopped operator's command line again, as a new Operator whose output is appended to the
// same log.
func (o *Operator) rerun() (*Operator, error) {
	again := &Operator{Args: o.Args, Config: o.Config, LogPath: o.LogPath, MetricsToken: o.MetricsToken, env: o.env, stopTimeout: o.stopTimeout}
	return again, again.run(os.O_APPEND)
}

// run starts the process; logMode (os.O_TRUNC or os.O_APPEND) says what happens to an existing log.
func (o *Operator) run(logMode int) error {
	out, err := os.OpenFile(o.LogPath, os.O_WRONLY|os.O_CREATE|logMode, 0o644)
	if err != nil {
		return err
	}
	defer out.Close() // the child has its own copy
	if _, err := fmt.Fprintf(out, "# %s\n", strings.Join(o.Args, " ")); err != nil {
		return err
	}
	cmd := exec.Command(o.Args[0], o.Args[1:]...)
	cmd.Env = o.env
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that a Ctrl-C meant for the demo reaches it only through Stop; killed if the
	// process that started it dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the operator: %w", err)
	}
	o.cmd, o.done = cmd, make(chan struct{})
	go func() {
		o.err = cmd.Wait()
		close(o.done)
	}()
	return nil
}

// PID is the operator's process id.
func (o *Operator) PID() int { return o.cmd.Process.Pid }

// Exited is nil while the operator runs.
func (o *Operator) Exited() error {
	select {
	case <-o.done:
		return fmt.Errorf("the operator exited: %v (log: %s)", o.err, o.LogPath)
	default:
		return nil
	}
}

// Stop sends SIGTERM, as the kubelet would, and SIGKILL after the grace period.
func (o *Operator) Stop() error {
	if o.Exited() != nil {
		return nil
	}
	if err := o.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-o.done:
		return nil
	case <-time.After(o.stopTimeout):
	}
	_ = o.cmd.Process.Kill()
	<-o.done
	return fmt.Errorf("the operator did not exit within %v of SIGTERM and was killed", o.stopTimeout)
}

// kill sends SIGKILL and waits until the process is gone.
func (o *Operator) kill() error {
	if o.Exited() != nil {
		return o.Exited()
	}
	if err := o.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-o.done
	return nil
}

// ready is nil once the readiness probe passes, as the Deployment's readinessProbe checks it.
func (o *Operator) ready(ctx context.Context) error {
	url := "http://" + o.Config.Health.HealthProbeBindAddress + "/" + o.Config.Health.ReadinessEndpointName
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// webhooksAdmit is nil once the API server reaches the operator's TrainJob webhooks: a dry-run TrainJob that
// names no runtime passes the defaulter (failurePolicy Fail: an unreachable one would refuse it) and is
// denied by the validator.
func webhooksAdmit(ctx context.Context, c client.Client) error {
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "webhook-probe"},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "no-such-runtime"}},
	}
	err := c.Create(ctx, tj, client.DryRunAll)
	if err != nil && strings.Contains(err.Error(), fmt.Sprintf("admission webhook %q denied the request", webhook.TrainJobValidatorName)) {
		return nil
	}
	return fmt.Errorf("the TrainJob webhooks do not answer yet: %v", err)
}

// operatorPorts are the loopback ports of the operator's servers.
type operatorPorts struct{ webhook, metrics, health int }

// freeOperatorPorts picks three distinct ports for the operator's servers. They come from cluster.FreePorts,
// below the ephemeral range and reserved across this machine's processes: a port the kernel picked for a
// listener and closed again can go to another process's outgoing connection before the operator binds it,
// and the operator then exits at start ("address already in use").
func freeOperatorPorts() (operatorPorts, error) {
	ports, err := cluster.FreePorts(3)
	if err != nil {
		return operatorPorts{}, err
	}
	return operatorPorts{webhook: ports[0], metrics: ports[1], health: ports[2]}, nil
}

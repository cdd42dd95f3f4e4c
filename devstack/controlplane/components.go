package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	basecompatibility "k8s.io/component-base/compatibility"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	apiserveroptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
)

// runAPIServer runs kube-apiserver until ctx is done. The flags follow what
// controller-runtime's envtest gives its API server: loopback only, client
// certificates from our CA, RBAC, and service-account signing keys.
func runAPIServer(ctx context.Context, port int, etcd string, p pki, extra []string) error {
	s := apiserveroptions.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	args := []string{
		"--etcd-servers=" + etcd,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + p.servingCert(),
		"--tls-private-key-file=" + p.servingKey(),
		"--client-ca-file=" + p.caCert(),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPublicKey(),
		"--service-account-signing-key-file=" + p.saPrivateKey(),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--profiling=false",
		"--enable-priority-and-fairness=false",
		// The "kubernetes" Service cannot point at a loopback address; nothing here
		// runs in a pod, so it needs no endpoints.
		"--endpoint-reconciler-type=none",
	}
	if err := fs.Parse(append(args, extra...)); err != nil {
		return err
	}
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	featureGate := s.GenericServerRunOptions.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	if err := logsapi.ValidateAndApply(s.Logs, featureGate); err != nil {
		return err
	}
	completed, err := s.Complete(ctx)
	if err != nil {
		return err
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return fmt.Errorf("invalid kube-apiserver options: %v", errs)
	}
	return apiserverapp.Run(ctx, completed)
}

// runControllerManager runs kube-controller-manager with only the controllers the
// local stack needs: garbage collection (owner references), namespace deletion, PVC
// and PV protection (which let a deleted claim or volume go once nothing uses it), and
// ClusterRole aggregation (what makes the edit role a tenant holds grant DBInstances).
func runControllerManager(ctx context.Context, kubeconfig string) error {
	s, err := kcmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return err
	}
	known, disabled, aliases := kcmapp.KnownControllers(), kcmapp.ControllersDisabledByDefault(), kcmapp.ControllerAliases()
	fs := pflag.NewFlagSet("kube-controller-manager", pflag.ContinueOnError)
	for _, f := range s.Flags(known, disabled, aliases).FlagSets {
		fs.AddFlagSet(f)
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		// pvc-protection releases a deleted PVC once no pod uses it (the stand-in's
		// VMs run no pods), pv-protection a deleted PV once it is not Bound, as in a
		// real cluster (the stand-in plays the provisioner and the PV binder).
		"--controllers=garbage-collector-controller,namespace-controller," +
			"persistentvolumeclaim-protection-controller,persistentvolume-protection-controller," +
			"clusterrole-aggregation-controller",
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
		"--concurrent-namespace-syncs=5",
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := s.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	c, err := s.Config(ctx, known, disabled, aliases)
	if err != nil {
		return err
	}
	return kcmapp.Run(ctx, c.Complete())
}

// waitReady polls the API server's /readyz with the admin certificate until it
// answers ok, ctx ends, or two minutes pass.
func waitReady(ctx context.Context, server string, p pki) error {
	caPEM, err := os.ReadFile(p.caCert())
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(p.adminCert(), p.adminKey())
	if err != nil {
		return err
	}
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}},
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, server+"/readyz", nil)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(body) == "ok" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(200 * time.Millisecond):
		}
	}
	klog.Error("kube-apiserver was not ready within 2 minutes")
	return fmt.Errorf("kube-apiserver was not ready within 2 minutes")
}

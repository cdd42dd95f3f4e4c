// Command controlplane runs a small, real Kubernetes control plane in one process,
// for dbi's local development stack and tests: embedded etcd, kube-apiserver and a
// kube-controller-manager limited to the garbage-collector, namespace, PVC- and
// PV-protection and ClusterRole-aggregation controllers, all on loopback. It is dev and test infrastructure only.
//
// State (certificates, etcd data, the admin kubeconfig) lives under --data-dir, so a
// second start with the same directory and ports keeps every object. The process
// prints one line, "controlplane ready", once the API server answers /readyz, and
// shuts everything down in order on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/klog/v2"
)

type settings struct {
	dataDir      string
	apiPort      int
	etcdPort     int
	etcdPeerPort int
	// apiserverArgs are extra kube-apiserver flags, after ours (a later flag wins).
	apiserverArgs []string
}

func main() {
	var s settings
	flag.StringVar(&s.dataDir, "data-dir", "", "directory for certificates, etcd data and the kubeconfig (required)")
	flag.IntVar(&s.apiPort, "apiserver-port", 6443, "kube-apiserver secure port on 127.0.0.1")
	flag.IntVar(&s.etcdPort, "etcd-port", 2379, "etcd client port on 127.0.0.1")
	flag.IntVar(&s.etcdPeerPort, "etcd-peer-port", 2380, "etcd peer port on 127.0.0.1")
	flag.Func("apiserver-arg", "an extra kube-apiserver flag, such as --watch-cache=false (repeatable)", func(v string) error {
		s.apiserverArgs = append(s.apiserverArgs, v)
		return nil
	})
	flag.Parse()
	if s.dataDir == "" {
		fmt.Fprintln(os.Stderr, "controlplane: --data-dir is required")
		os.Exit(2)
	}
	if err := run(s); err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		os.Exit(1)
	}
}

// run starts etcd, then the API server, then the controller manager, and stops them
// in reverse order when a signal arrives or one of them fails.
func run(s settings) error {
	dataDir, err := filepath.Abs(s.dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	pki, err := ensurePKI(filepath.Join(dataDir, "pki"))
	if err != nil {
		return fmt.Errorf("while preparing certificates: %w", err)
	}
	server := "https://127.0.0.1:" + strconv.Itoa(s.apiPort)
	kubeconfig := filepath.Join(dataDir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, server, pki); err != nil {
		return fmt.Errorf("while writing the kubeconfig: %w", err)
	}

	etcd, err := startEtcd(filepath.Join(dataDir, "etcd"), s.etcdPort, s.etcdPeerPort)
	if err != nil {
		return fmt.Errorf("while starting etcd: %w", err)
	}
	defer func() {
		etcd.Close()
		klog.Info("etcd stopped")
	}()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var wg sync.WaitGroup
	start := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := fn(ctx)
			if ctx.Err() == nil {
				cancel(fmt.Errorf("%s stopped: %v", name, err))
			}
		}()
	}

	start("kube-apiserver", func(ctx context.Context) error {
		return runAPIServer(ctx, s.apiPort, "http://127.0.0.1:"+strconv.Itoa(s.etcdPort), pki, s.apiserverArgs)
	})
	if err := waitReady(ctx, server, pki); err != nil {
		cancel(err)
	} else {
		start("kube-controller-manager", func(ctx context.Context) error {
			return runControllerManager(ctx, kubeconfig)
		})
		fmt.Println("controlplane ready")
		fmt.Println("kubeconfig " + kubeconfig)
	}

	select {
	case <-ctx.Done():
	case err := <-etcd.Err():
		cancel(fmt.Errorf("etcd failed: %w", err))
	}
	cause := context.Cause(ctx)
	klog.Infof("shutting down: %v", cause)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		klog.Warning("components did not stop within 20s; closing etcd anyway")
	}
	// A signal cancels the parent context (cause context.Canceled): a clean stop.
	if errors.Is(cause, context.Canceled) {
		return nil
	}
	return cause
}

// startEtcd starts a single-member etcd whose data survives restarts. Fsync is off:
// this is a throwaway development store, and it keeps the tests fast.
func startEtcd(dir string, port, peerPort int) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "dbi-dev"
	cfg.Dir = dir
	client := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(port)}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(peerPort)}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd was not ready within 60s")
	}
}

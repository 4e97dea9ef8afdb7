package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tidal-autoscaler/tidal/test/exporter"
)

// workloadControllers are the kube-controller-manager controllers the tests
// need: Deployments down to pods, garbage collection, namespaces, and
// service accounts (pods need the default one). The HPA controller is off:
// Tidal, or the oracle instance, does that job.
var workloadControllers = []string{
	"deployment-controller", "replicaset-controller", "statefulset-controller",
	"garbage-collector-controller", "namespace-controller",
	"serviceaccount-controller", "serviceaccount-token-controller",
	"-horizontal-pod-autoscaler-controller",
}

// portClashRetries is how often a server whose port was taken between
// choosing it and binding it is started again on new ports.
const portClashRetries = 3

func isPortClash(err error) bool {
	return err != nil && strings.Contains(err.Error(), "address already in use")
}

// pickPorts chooses n distinct free loopback ports (a variable so that a
// test can hand out a taken one).
var pickPorts = freePorts

// onFreePorts runs start with n distinct free loopback ports, and again on
// new ones when it fails because one was taken between choosing and binding
// it: the test packages run in parallel on one machine, so every server the
// harness starts goes through here.
func onFreePorts(n int, start func(ports []int) error) error {
	var err error
	for range portClashRetries {
		ports, perr := pickPorts(n)
		if perr != nil {
			return perr
		}
		if err = start(ports); !isPortClash(err) {
			return err
		}
	}
	return err
}

func (h *Harness) writePKI() error {
	var err error
	if h.CA, err = NewCA("tidal-harness-ca"); err != nil {
		return err
	}
	if h.FrontProxyCA, err = NewCA("tidal-harness-front-proxy-ca"); err != nil {
		return err
	}
	certs := h.path("certs")
	write := func(name string, data []byte) error { return os.WriteFile(h.path("certs", name), data, 0o600) }
	if err := write("ca.crt", h.CA.CertPEM); err != nil {
		return err
	}
	if err := write("front-proxy-ca.crt", h.FrontProxyCA.CertPEM); err != nil {
		return err
	}
	serving, err := h.CA.ServingCert("kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")})
	if err != nil {
		return err
	}
	if _, _, err := serving.WriteFiles(certs, "apiserver"); err != nil {
		return err
	}
	proxy, err := h.FrontProxyCA.ClientCert("front-proxy-client")
	if err != nil {
		return err
	}
	if _, _, err := proxy.WriteFiles(certs, "front-proxy-client"); err != nil {
		return err
	}
	saKey, saPub, err := newServiceAccountKey()
	if err != nil {
		return err
	}
	if err := write("sa.key", saKey); err != nil {
		return err
	}
	return write("sa.pub", saPub)
}

func (h *Harness) startEtcd(ctx context.Context) (string, error) {
	var url string
	err := onFreePorts(2, func(ports []int) error {
		client, peer := "http://"+hostPort(ports[0]), "http://"+hostPort(ports[1])
		data := h.path("data", fmt.Sprintf("etcd-%d", ports[0]))
		p, err := h.run("etcd", h.bin("etcd"), []string{
			"--name=harness", "--data-dir=" + data,
			"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=harness=" + peer,
			// A test cluster needs no durability; fsync dominates start-up otherwise.
			"--unsafe-no-fsync=true", "--heartbeat-interval=10", "--election-timeout=100",
			"--log-level=warn",
		}, ports...)
		if err != nil {
			return err
		}
		url, h.EtcdDataDir = client, data
		return waitFor(ctx, p, "etcd", 30*time.Second, func(ctx context.Context) error {
			return httpOK(ctx, http.DefaultClient, client+"/health")
		})
	})
	return url, err
}

func (h *Harness) startAPIServer(ctx context.Context, etcdURL string) error {
	certs := func(f string) string { return h.path("certs", f) }
	return onFreePorts(1, func(ports []int) error {
		port := ports[0]
		h.APIServerURL = "https://" + hostPort(port)
		args := []string{
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
			"--tls-cert-file=" + certs("apiserver.crt"), "--tls-private-key-file=" + certs("apiserver.key"),
			"--client-ca-file=" + certs("ca.crt"),
			"--authorization-mode=Node,RBAC",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + certs("sa.pub"),
			"--service-account-signing-key-file=" + certs("sa.key"),
			"--service-cluster-ip-range=10.96.0.0/16",
			// The aggregation layer: the front-proxy CA and the names the
			// aggregator forwards the authenticated user in.
			"--requestheader-client-ca-file=" + certs("front-proxy-ca.crt"),
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--requestheader-uid-headers=X-Remote-Uid",
			"--proxy-client-cert-file=" + certs("front-proxy-client.crt"),
			"--proxy-client-key-file=" + certs("front-proxy-client.key"),
			// Aggregated servers run on loopback behind ExternalName Services;
			// endpoint routing would reject 127.0.0.1.
			"--enable-aggregator-routing=false",
			"--endpoint-reconciler-type=none",
			// No node-lifecycle controller runs to remove the not-ready taints.
			"--disable-admission-plugins=TaintNodesByCondition",
			"--allow-privileged=true",
			"--profiling=false",
			"--cert-dir=" + h.path("certs", "apiserver-generated"),
		}
		args = append(append(args, h.featureGateArgs()...), h.opts.APIServerArgs...)
		p, err := h.run("kube-apiserver", h.bin("kube-apiserver"), args, port)
		if err != nil {
			return err
		}
		admin, err := h.CA.ClientCert("tidal-harness-admin", "system:masters")
		if err != nil {
			return err
		}
		h.AdminKubeconfig = h.path("admin.kubeconfig")
		if err := writeKubeconfig(h.AdminKubeconfig, h.APIServerURL, h.CA.CertPEM, admin, "tidal-harness-admin"); err != nil {
			return err
		}
		if h.Admin, err = clientcmd.BuildConfigFromFlags("", h.AdminKubeconfig); err != nil {
			return err
		}
		h.Admin.QPS, h.Admin.Burst = 200, 400
		if h.Client, err = kubernetes.NewForConfig(h.Admin); err != nil {
			return err
		}
		tlsClient, err := h.adminHTTPClient()
		if err != nil {
			return err
		}
		return waitFor(ctx, p, "kube-apiserver", 60*time.Second, func(ctx context.Context) error {
			return httpOK(ctx, tlsClient, h.APIServerURL+"/readyz")
		})
	})
}

func (h *Harness) featureGateArgs() []string {
	if len(h.opts.FeatureGates) == 0 {
		return nil
	}
	return []string{"--feature-gates=" + strings.Join(h.opts.FeatureGates, ",")}
}

// adminHTTPClient is a plain HTTP client that trusts the harness CA and
// authenticates as the admin, for raw requests such as /readyz.
func (h *Harness) adminHTTPClient() (*http.Client, error) {
	cfg := *h.Admin
	rt, err := restTransport(&cfg)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: rt, Timeout: 5 * time.Second}, nil
}

// startControllerManager starts a kube-controller-manager running the given
// controllers; name tells the instances apart in logs.
func (h *Harness) startControllerManager(ctx context.Context, name string, controllers []string, extra []string) error {
	args := append([]string{
		"--controllers=" + strings.Join(controllers, ","),
		// Each controller acts as its own service account, as in real
		// clusters: the HPA controller reads metrics as
		// system:serviceaccount:kube-system:horizontal-pod-autoscaler.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + h.path("certs", "sa.key"),
		"--root-ca-file=" + h.path("certs", "ca.crt"),
	}, h.featureGateArgs()...)
	return h.startKubeComponent(ctx, name, "kube-controller-manager", "system:kube-controller-manager", append(args, extra...))
}

func (h *Harness) startScheduler(ctx context.Context) error {
	return h.startKubeComponent(ctx, "kube-scheduler", "kube-scheduler", "system:kube-scheduler", nil)
}

// startKubeComponent starts a control-plane component that authenticates as
// user with a client certificate, serves HTTPS on a free loopback port, and
// is ready when its /healthz answers.
func (h *Harness) startKubeComponent(ctx context.Context, name, bin, user string, extra []string) error {
	kubeconfig, _, err := h.Kubeconfig(Identity{User: user})
	if err != nil {
		return err
	}
	client, err := insecureLocalClient()
	if err != nil {
		return err
	}
	return onFreePorts(1, func(ports []int) error {
		port := ports[0]
		ready := kubeComponentReady(client, fmt.Sprint(port))
		args := append([]string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
			"--cert-dir=" + h.path("certs", name),
			"--leader-elect=false",
			"--profiling=false",
		}, extra...)
		p, err := h.run(name, h.bin(bin), args, port)
		if err != nil {
			return err
		}
		return waitFor(ctx, p, name, 60*time.Second, ready)
	})
}

// HPAControllerProcess is the harness's name of the kube-controller-manager
// that runs only the HPA controller (Options.HPAController): the key of
// its pid in PIDs and the name SecurePort takes.
const HPAControllerProcess = "kube-controller-manager-hpa"

// kubeComponentReady is the readiness check of a kube-controller-manager or
// kube-scheduler on 127.0.0.1:port: its /healthz answers 200 (over TLS
// with its self-signed certificate, so client is insecureLocalClient's).
func kubeComponentReady(client *http.Client, port string) func(context.Context) error {
	url := "https://" + net.JoinHostPort("127.0.0.1", port) + "/healthz"
	return func(ctx context.Context) error { return httpOK(ctx, client, url) }
}

func (h *Harness) startPrometheus(ctx context.Context) error {
	h.Exporter = exporter.New()
	if err := h.Exporter.Start("127.0.0.1:0"); err != nil {
		return err
	}
	configPath := h.path("prometheus.yml")
	if err := h.writePrometheusConfig(); err != nil {
		return err
	}
	return onFreePorts(1, func(ports []int) error {
		port := ports[0]
		url := "http://" + hostPort(port)
		p, err := h.run("prometheus", h.bin("prometheus"), []string{
			"--config.file=" + configPath,
			"--storage.tsdb.path=" + h.path("data", fmt.Sprintf("prometheus-%d", port)),
			"--web.listen-address=" + hostPort(port),
			"--storage.tsdb.retention.time=1d",
			// Lets tests drop series with the admin API (e.g. a pod gone).
			"--web.enable-admin-api",
			"--log.level=warn",
		}, port)
		if err != nil {
			return err
		}
		if err := waitFor(ctx, p, "prometheus", 60*time.Second, func(ctx context.Context) error {
			return httpOK(ctx, http.DefaultClient, url+"/-/ready")
		}); err != nil {
			return err
		}
		h.mu.Lock()
		h.PrometheusURL = url
		h.prometheus = p
		h.mu.Unlock()
		return nil
	})
}

// httpOK succeeds when GET url answers 200.
func httpOK(ctx context.Context, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// insecureLocalClient probes health endpoints of servers that serve a
// self-signed certificate they generated at start; it never leaves loopback.
func insecureLocalClient() (*http.Client, error) {
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, //nolint:gosec // loopback health probe of a self-signed server.
		}},
	}, nil
}

// CertPool returns a pool holding the harness CA.
func (h *Harness) CertPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(h.CA.CertPEM)
	return pool
}

package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// PrometheusAdapterBinary is prometheus-adapter v0.12 as `make tools`
// builds it from test/bench/peer: the peer Tidal replaces.
const PrometheusAdapterBinary = "prometheus-adapter"

// PeerOptions say how to run prometheus-adapter under the harness.
type PeerOptions struct {
	// RuleFile is passed as --config.
	RuleFile string
	// Args are extra flags, e.g. --metrics-relist-interval=5s.
	Args []string
	// APIServices are GROUP/VERSION pairs to register for it; each must
	// become Available. Empty registers none (the caller may take them
	// over later with RegisterAPIService and Server).
	APIServices [][2]string
}

// StartPrometheusAdapter runs prometheus-adapter on loopback as the
// tidal-system/prometheus-adapter service account, bound like Tidal's
// adapter, serving as the Service of that name; it waits for /healthz and
// registers the APIServices.
func (h *Harness) StartPrometheusAdapter(ctx context.Context, o PeerOptions) (*Adapter, error) {
	bin := h.bin(PrometheusAdapterBinary)
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s is missing from the tools folder %s: run `make tools`, which builds it from test/bench/peer", PrometheusAdapterBinary, h.tools)
	}
	return h.startAggregated(ctx, "prometheus-adapter", bin, o.APIServices, func(kubeconfig string) []string {
		return append([]string{
			"--lister-kubeconfig=" + kubeconfig,
			"--prometheus-url=" + h.PrometheusURL, "--config=" + o.RuleFile,
		}, o.Args...)
	})
}

// TestAdapter is custom-metrics-apiserver's test-adapter (test/cmd/testadapter)
// running under the harness.
type TestAdapter struct {
	*Adapter
	// WriteURL is http://127.0.0.1:PORT, where values are written (see
	// WriteExternal).
	WriteURL string
}

// StartTestAdapter builds and runs custom-metrics-apiserver's test-adapter
// as the tidal-system/test-adapter service account, serving as the Service
// of that name, and registers the APIServices.
func (h *Harness) StartTestAdapter(ctx context.Context, apis [][2]string) (*TestAdapter, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(h.Dir, "testadapter")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./test/cmd/testadapter")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./test/cmd/testadapter: %w\n%s", err, out)
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	t := &TestAdapter{WriteURL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	t.Adapter, err = h.startAggregated(ctx, "test-adapter", bin, apis, func(kubeconfig string) []string {
		return []string{"--lister-kubeconfig=" + kubeconfig, "--write-address=" + hostPort(port)}
	})
	return t, err
}

// WriteCustom sets the test-adapter's custom metric METRIC of the object
// NAMESPACE/RESOURCE/NAME (RESOURCE as the API names it, e.g. pods) to value.
func (t *TestAdapter) WriteCustom(ctx context.Context, namespace, resource, name, metric, value string) error {
	u := t.WriteURL + "/write-metrics/namespaces/" + url.PathEscape(namespace) + "/" + url.PathEscape(resource) + "/" + url.PathEscape(name) + "/" + url.PathEscape(metric)
	return t.post(ctx, u, `"`+value+`"`, http.StatusOK)
}

// WriteExternal sets the test-adapter's external metric METRIC{labels} to
// value, in every namespace.
func (t *TestAdapter) WriteExternal(ctx context.Context, metric string, labels map[string]string, value string) error {
	var sel []string
	for k, v := range labels {
		sel = append(sel, k+"="+v)
	}
	u := t.WriteURL + "/write-external/" + url.PathEscape(metric) + "?labels=" + url.QueryEscape(strings.Join(sel, ","))
	return t.post(ctx, u, value, http.StatusNoContent)
}

func (t *TestAdapter) post(ctx context.Context, u, body string, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST %s: %d %s", u, resp.StatusCode, b)
	}
	return nil
}

// startAggregated runs an aggregated API server built on k8s.io/apiserver
// on loopback as the tidal-system/NAME service account (bound like Tidal's
// adapter), serving as the Service NAME, with the serving, authentication
// and authorization flags those servers share and args(kubeconfig); it
// waits for /healthz and registers the APIServices.
func (h *Harness) startAggregated(ctx context.Context, name, bin string, apis [][2]string, args func(kubeconfig string) []string) (*Adapter, error) {
	a := &Adapter{Namespace: "tidal-system", ServiceAccount: name}
	if err := h.bindAdapterIdentity(ctx, a.Namespace, a.ServiceAccount); err != nil {
		return nil, err
	}
	kubeconfig, _, err := h.Kubeconfig(ServiceAccountIdentity(a.Namespace, a.ServiceAccount))
	if err != nil {
		return nil, err
	}
	serving, err := h.ServingCertFor(a.Namespace, a.ServiceAccount)
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := serving.WriteFiles(h.Dir, name+"-serving")
	if err != nil {
		return nil, err
	}
	err = onFreePorts(1, func(ports []int) error {
		a.Port = ports[0]
		all := append([]string{
			"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", a.Port),
			"--tls-cert-file=" + certFile, "--tls-private-key-file=" + keyFile,
			"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		}, args(kubeconfig)...)
		var err error
		if a.Process, err = h.run(name, bin, all, a.Port); err != nil {
			return err
		}
		probe := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: h.CertPool()}}}
		return waitFor(ctx, a.Process, name+" /healthz", 90*time.Second, func(ctx context.Context) error {
			return httpOK(ctx, probe, a.URL("/healthz"))
		})
	})
	if err != nil {
		return a, err
	}
	return a, h.registerAll(ctx, a, apis)
}

// Server is the adapter as the aggregator reaches it.
func (a *Adapter) Server(ca []byte) AggregatedServer {
	return AggregatedServer{Namespace: a.Namespace, Service: a.ServiceAccount, Port: a.Port, CABundle: ca}
}

// registerAll points each GROUP/VERSION's APIService at a and waits until
// every one is Available.
func (h *Harness) registerAll(ctx context.Context, a *Adapter, apis [][2]string) error {
	for _, gv := range apis {
		if err := h.RegisterAPIService(ctx, a.Server(h.CA.CertPEM), gv[0], gv[1]); err != nil {
			return err
		}
	}
	for _, gv := range apis {
		if err := h.WaitAPIServiceAvailable(ctx, gv[1]+"."+gv[0], 60*time.Second); err != nil {
			return fmt.Errorf("%w; log %s ends with:\n%s", err, a.Process.LogPath(), a.Process.LogTail())
		}
	}
	return nil
}

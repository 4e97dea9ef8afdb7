package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
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
	a := &Adapter{Namespace: "tidal-system", ServiceAccount: "prometheus-adapter"}
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
	certFile, keyFile, err := serving.WriteFiles(h.Dir, "prometheus-adapter-serving")
	if err != nil {
		return nil, err
	}
	if a.Port, err = FreePort(); err != nil {
		return nil, err
	}
	args := append([]string{
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", a.Port),
		"--tls-cert-file=" + certFile, "--tls-private-key-file=" + keyFile,
		"--lister-kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--prometheus-url=" + h.PrometheusURL + "/", "--config=" + o.RuleFile,
	}, o.Args...)
	if a.Process, err = h.run("prometheus-adapter", bin, args, a.Port); err != nil {
		return nil, err
	}
	probe := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: h.CertPool()}}}
	if err := waitFor(ctx, a.Process, "prometheus-adapter /healthz", 90*time.Second, func(ctx context.Context) error {
		return httpOK(ctx, probe, a.URL("/healthz"))
	}); err != nil {
		return a, err
	}
	return a, h.registerAll(ctx, a, o.APIServices)
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

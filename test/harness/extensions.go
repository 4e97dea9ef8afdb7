package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// ScrapeAutoscaler returns the Prometheus text of path (e.g. /metrics) on
// a's secure port, read with the harness admin's client certificate. The
// serving certificate is self-signed, so it is not verified.
func (h *Harness) ScrapeAutoscaler(ctx context.Context, a *Autoscaler, path string) (string, error) {
	cfg := rest.CopyConfig(h.Admin)
	cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile = nil, ""
	cfg.TLSClientConfig.Insecure = true
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.MetricsURL(path), nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", a.MetricsURL(path), resp.Status, body)
	}
	return string(body), nil
}

// SetNodeLabel sets (value non-nil) or removes (nil) a label of a node,
// e.g. to let pods with a matching nodeSelector be scheduled on the kwok
// node only from some point of a test on.
func (h *Harness) SetNodeLabel(ctx context.Context, node, key string, value *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{key: value}}})
	if err != nil {
		return err
	}
	if _, err := h.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label node %s with %s: %w", node, key, err)
	}
	return nil
}

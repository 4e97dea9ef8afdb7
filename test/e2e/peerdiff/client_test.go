package peerdiff

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// answer is one server's reply to one request.
type answer struct {
	code int
	body []byte
}

// asHPA returns a client that presents the HPA controller's identity (a
// client certificate of the harness CA, which both servers' delegated
// authentication trusts) and trusts their serving certificates.
func asHPA(h *harness.Harness) (*http.Client, error) {
	kp, err := h.CA.ClientCert(harness.HPAServiceAccount.User, harness.HPAServiceAccount.Groups...)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: h.CertPool(), Certificates: []tls.Certificate{cert}},
	}}, nil
}

func fetch(ctx context.Context, c *http.Client, a *harness.Adapter, path string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL(path), nil)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return answer{code: resp.StatusCode, body: body}, err
}

// promHasWindow succeeds once Prometheus holds every series with a full
// 30 s rate window: the first pod's request rate reads what was set.
func promHasWindow(ctx context.Context, h *harness.Harness) error {
	q := fmt.Sprintf(`sum(rate(http_requests_total{namespace=%q,pod=%q}[30s])) and on() (count(queue_depth) == 2)`, ns, env.pods[0])
	v, err := promScalar(ctx, h, q)
	if err != nil {
		return err
	}
	if want := 1.2345; math.Abs(v-want) > 0.001*want {
		return fmt.Errorf("rate %v, want %v", v, want)
	}
	return nil
}

func promScalar(ctx context.Context, h *harness.Harness, query string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.PrometheusURL+"/api/v1/query?query="+url.QueryEscape(query), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("%d results", len(r.Data.Result))
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

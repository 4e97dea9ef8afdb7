package prom

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"golang.org/x/sync/singleflight"

	"github.com/tidal-autoscaler/tidal/adapter/monitor"
)

// DefaultBackend names the backend of --prometheus-url.
const DefaultBackend = "default"

// MaxGETBytes is the longest URL-encoded form sent with GET when the verb
// is GET; longer requests (a regex of many pod names) are sent with POST,
// which Prometheus, Thanos and Mimir all accept, instead of failing with
// HTTP 414 at a proxy.
const MaxGETBytes = 4096

// Options configure one backend.
type Options struct {
	// Name identifies the backend in errors and metrics.
	Name string
	URL  *url.URL
	// HTTPClient carries TLS and credentials; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Headers are added to every request (e.g. X-Scope-OrgID).
	Headers map[string]string
	// Verb is GET (POST only for requests longer than MaxGETBytes) or POST.
	Verb string
	// Timeout bounds each query; SeriesTimeout each discovery request
	// (zero: 3×Timeout, since /api/v1/series may scan much more).
	Timeout, SeriesTimeout time.Duration
	// CacheTTL is how long a "now" query result is reused; 0 disables the
	// cache. CacheSize bounds the number of cached queries (default 4096),
	// CacheMaxBytes the bytes their results hold, estimated (default
	// DefaultCacheMaxBytes).
	CacheTTL      time.Duration
	CacheSize     int
	CacheMaxBytes int64
	// MaxResponseBytes bounds the bytes read of a query's response,
	// MaxSeriesResponseBytes of a series (discovery) response; longer ones
	// fail with ErrTooLarge. Zero means DefaultMaxResponseBytes and
	// DefaultMaxSeriesResponseBytes.
	MaxResponseBytes, MaxSeriesResponseBytes int64
	// Metrics records cache hits and coalesced queries; nil records nothing.
	Metrics *monitor.Metrics
}

type client struct {
	name, redacted string
	base           *url.URL
	http           *http.Client
	api            promv1.API
	verb           string
	timeout        time.Duration
	seriesTimeout  time.Duration
	flight         singleflight.Group
	cache          *cache
	metrics        *monitor.Metrics
	maxSeriesBytes int64
}

var _ Client = (*client)(nil)

// New returns a client for one backend. It does not contact the backend.
func New(o Options) (Client, error) {
	if o.URL == nil {
		return nil, fmt.Errorf("backend %q: no URL", o.Name)
	}
	if o.URL.Scheme != "http" && o.URL.Scheme != "https" {
		return nil, fmt.Errorf("backend %q: URL %q must use http or https", o.Name, o.URL.Redacted())
	}
	if o.Verb == "" {
		o.Verb = http.MethodGet
	}
	if o.Verb != http.MethodGet && o.Verb != http.MethodPost {
		return nil, fmt.Errorf("backend %q: verb must be GET or POST, got %q", o.Name, o.Verb)
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.SeriesTimeout <= 0 {
		o.SeriesTimeout = 3 * o.Timeout
	}
	if o.CacheSize <= 0 {
		o.CacheSize = 4096
	}
	if o.CacheMaxBytes <= 0 {
		o.CacheMaxBytes = DefaultCacheMaxBytes
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.MaxSeriesResponseBytes <= 0 {
		o.MaxSeriesResponseBytes = DefaultMaxSeriesResponseBytes
	}
	if o.Metrics == nil {
		o.Metrics = monitor.New()
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	if len(o.Headers) > 0 {
		withHeaders := *hc
		base := transportOf(hc)
		h := http.Header{}
		for k, v := range o.Headers {
			h.Set(k, v)
		}
		withHeaders.Transport = &headerTransport{base: base, headers: h}
		hc = &withHeaders
	}
	// Queries are read whole by client_golang: their bodies are limited in
	// the transport. Series responses are streamed by Series, which
	// limits them itself.
	queryHC := *hc
	queryHC.Transport = &limitTransport{base: transportOf(hc), max: o.MaxResponseBytes, flag: "--prometheus-max-response-bytes"}
	apiClient, err := promapi.NewClient(promapi.Config{Address: o.URL.String(), Client: &queryHC})
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", o.Name, err)
	}
	c := &client{
		name:           o.Name,
		redacted:       o.URL.Redacted(),
		base:           o.URL,
		http:           hc,
		verb:           o.Verb,
		timeout:        o.Timeout,
		seriesTimeout:  o.SeriesTimeout,
		metrics:        o.Metrics,
		maxSeriesBytes: o.MaxSeriesResponseBytes,
	}
	c.api = promv1.NewAPI(&verbClient{Client: apiClient, verb: o.Verb})
	if o.CacheTTL > 0 {
		c.cache = newCache(o.CacheTTL, o.CacheSize, o.CacheMaxBytes, time.Now)
	}
	return c, nil
}

func (c *client) Name() string { return c.name }

// Query implements Client.
func (c *client) Query(ctx context.Context, query string, ts time.Time) (model.Vector, error) {
	cacheable := ts.IsZero() && c.cache != nil
	if cacheable {
		if v, ok := c.cache.get(query); ok {
			c.metrics.CacheHits.WithLabelValues(c.name).Inc()
			return v, nil
		}
	}
	key := query
	if !ts.IsZero() {
		key = ts.UTC().Format(time.RFC3339Nano) + "\x00" + query
	}
	first := false
	ch := c.flight.DoChan(key, func() (any, error) {
		first = true
		// Not the caller's context: one caller giving up must not fail the
		// others waiting on the same request.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
		v, err := c.query(qctx, query, ts)
		if err == nil && cacheable {
			c.cache.put(query, v)
		}
		return v, err
	})
	select {
	case res := <-ch:
		if !first {
			c.metrics.Coalesced.WithLabelValues(c.name).Inc()
		}
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(model.Vector), nil
	case <-ctx.Done():
		return nil, c.classify(ctx.Err())
	}
}

func (c *client) query(ctx context.Context, query string, ts time.Time) (model.Vector, error) {
	val, _, err := c.api.Query(ctx, query, ts)
	if err != nil {
		return nil, c.classify(err)
	}
	switch v := val.(type) {
	case model.Vector:
		return v, nil
	case *model.Scalar:
		return model.Vector{{Metric: model.Metric{}, Value: v.Value, Timestamp: v.Timestamp}}, nil
	default:
		return nil, &Error{Backend: c.name, URL: c.redacted, Kind: ErrQuery,
			Err: fmt.Errorf("query %q returned a %s, want an instant vector or a scalar", query, val.Type())}
	}
}

// verbClient turns the POST requests of client_golang's API into GET when
// the verb is GET and the request is short.
type verbClient struct {
	promapi.Client
	verb string
}

func (v *verbClient) Do(ctx context.Context, req *http.Request) (*http.Response, []byte, error) {
	if v.verb == http.MethodGet && req.Method == http.MethodPost && req.GetBody != nil && req.ContentLength <= MaxGETBytes {
		body, err := req.GetBody()
		if err != nil {
			return nil, nil, err
		}
		form, err := io.ReadAll(body)
		_ = body.Close()
		if err != nil {
			return nil, nil, err
		}
		u := *req.URL
		u.RawQuery = string(form)
		get, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, nil, err
		}
		req = get
	}
	return v.Client.Do(ctx, req)
}

func transportOf(hc *http.Client) http.RoundTripper {
	if hc.Transport == nil {
		return http.DefaultTransport
	}
	return hc.Transport
}

type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header[k] = v
	}
	return t.base.RoundTrip(req)
}

// formValues renders the parameters of a series request.
func seriesForm(matchers []string, start, end time.Time) url.Values {
	form := url.Values{}
	for _, m := range matchers {
		form.Add("match[]", m)
	}
	if !start.IsZero() {
		form.Set("start", formatTime(start))
	}
	if !end.IsZero() {
		form.Set("end", formatTime(end))
	}
	return form
}

func formatTime(t time.Time) string {
	return fmt.Sprintf("%.3f", float64(t.UnixMilli())/1000)
}

// Series implements Client.
func (c *client) Series(ctx context.Context, matchers []string, start, end time.Time) ([]Shape, error) {
	ctx, cancel := context.WithTimeout(ctx, c.seriesTimeout)
	defer cancel()
	u := c.base.JoinPath("/api/v1/series")
	encoded := seriesForm(matchers, start, end).Encode()
	var req *http.Request
	var err error
	if c.verb == http.MethodGet && len(encoded) <= MaxGETBytes {
		u.RawQuery = encoded
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(encoded))
		if req != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	if err != nil {
		return nil, c.classify(err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.classify(err)
	}
	defer resp.Body.Close()
	body, err := limitBody(resp, c.maxSeriesBytes, "--prometheus-max-series-response-bytes")
	if err != nil {
		return nil, c.classify(err)
	}
	shapes, err := decodeSeries(resp, MaxShapeBytes)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, c.classify(ctx.Err())
		case body.exceeded:
			return nil, c.classify(tooLarge(body.max, body.flag))
		}
		return nil, c.classify(err)
	}
	slices.SortFunc(shapes, func(a, b Shape) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return slices.Compare(a.Labels, b.Labels)
	})
	return shapes, nil
}

package prom

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/spf13/pflag"
	"golang.org/x/net/http/httpguts"

	"github.com/tidal-autoscaler/tidal/internal/cmdutil"
)

// FlagOptions say how to reach Prometheus: the --prometheus-* flags of
// `tidal adapter` and `tidal rules explain`. The flag names are those
// prometheus-adapter users know. Build them with NewFlagOptions, then
// Validate, then Config.
type FlagOptions struct {
	URL            string
	Verb           string
	TokenFile      string
	CAFile         string
	ClientCertFile string
	ClientKeyFile  string
	// Headers are "key=value" pairs; a key may repeat.
	Headers []string
	// AuthConfigFile is a prometheus/common HTTPClientConfig YAML file, for
	// what the single-purpose flags cannot say (basic auth, OAuth2,
	// proxies, ...).
	AuthConfigFile string
	// Timeout bounds each query; CacheTTL is how long a result is reused.
	Timeout  time.Duration
	CacheTTL time.Duration
}

// FlagConfig is a validated way to reach Prometheus, the default backend's
// part of Options.
type FlagConfig struct {
	URL *url.URL
	// Verb is GET or POST, for the query endpoints.
	Verb string
	// Client carries the TLS, credentials and headers; the caller adds
	// nothing to it.
	Client *http.Client
	// Timeout bounds each query; CacheTTL is how long a result is reused.
	Timeout  time.Duration
	CacheTTL time.Duration
}

// NewFlagOptions returns the options with the adapter's defaults.
func NewFlagOptions() FlagOptions {
	return FlagOptions{Verb: "GET", Timeout: 10 * time.Second, CacheTTL: 5 * time.Second}
}

// AddFlags adds the Prometheus flags to fs.
func (o *FlagOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.URL, "prometheus-url", o.URL,
		"Base URL of the Prometheus HTTP API, e.g. http://prometheus.monitoring.svc:9090. Required.")
	fs.StringVar(&o.Verb, "prometheus-verb", o.Verb,
		"HTTP method for queries: GET, or POST for long queries.")
	fs.StringVar(&o.TokenFile, "prometheus-token-file", o.TokenFile,
		"File holding a bearer token sent to Prometheus. Re-read on every request, so rotated tokens are picked up.")
	fs.StringVar(&o.CAFile, "prometheus-ca-file", o.CAFile,
		"CA bundle used to verify Prometheus' serving certificate.")
	fs.StringVar(&o.ClientCertFile, "prometheus-client-tls-cert-file", o.ClientCertFile,
		"Client certificate presented to Prometheus. Requires --prometheus-client-tls-key-file.")
	fs.StringVar(&o.ClientKeyFile, "prometheus-client-tls-key-file", o.ClientKeyFile,
		"Private key of --prometheus-client-tls-cert-file.")
	fs.StringArrayVar(&o.Headers, "prometheus-header", o.Headers,
		"Header sent with every request to Prometheus, as key=value (e.g. X-Scope-OrgID=tenant-a). Repeat the flag for more headers.")
	fs.StringVar(&o.AuthConfigFile, "prometheus-auth-config", o.AuthConfigFile,
		"Prometheus HTTP client configuration file (the http_config YAML of prometheus/common: basic_auth, authorization, oauth2, tls_config, proxy_url, http_headers). "+
			"The other --prometheus-* flags must not set what this file sets.")
	fs.DurationVar(&o.Timeout, "prometheus-timeout", o.Timeout,
		"Time limit of each query to Prometheus; a metric request answers 503 ServiceUnavailable when it passes. Discovery requests get three times as long.")
	fs.DurationVar(&o.CacheTTL, "query-cache-ttl", o.CacheTTL,
		"How long a query result is reused for identical requests (timestamps keep the sample's time, so they show the age). 0 disables the cache; identical concurrent queries are always sent once.")
}

// Validate checks the Prometheus options.
func (o *FlagOptions) Validate() []error {
	var errs []error
	if o.URL == "" {
		errs = append(errs, errors.New("--prometheus-url is required: set it to the base URL of the Prometheus HTTP API, e.g. http://prometheus.monitoring.svc:9090"))
	} else if _, err := parsePrometheusURL(o.URL); err != nil {
		errs = append(errs, err)
	}
	if o.Verb != http.MethodGet && o.Verb != http.MethodPost {
		errs = append(errs, fmt.Errorf("--prometheus-verb must be GET or POST, got %q", o.Verb))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--prometheus-timeout must be positive, got %s", o.Timeout))
	}
	if o.CacheTTL < 0 {
		errs = append(errs, fmt.Errorf("--query-cache-ttl must not be negative, got %s", o.CacheTTL))
	}
	if (o.ClientCertFile == "") != (o.ClientKeyFile == "") {
		errs = append(errs, errors.New("--prometheus-client-tls-cert-file and --prometheus-client-tls-key-file must be set together"))
	}
	errs = append(errs, cmdutil.CheckFile("--prometheus-token-file", o.TokenFile)...)
	errs = append(errs, cmdutil.CheckFile("--prometheus-ca-file", o.CAFile)...)
	errs = append(errs, cmdutil.CheckFile("--prometheus-client-tls-cert-file", o.ClientCertFile)...)
	errs = append(errs, cmdutil.CheckFile("--prometheus-client-tls-key-file", o.ClientKeyFile)...)
	errs = append(errs, cmdutil.CheckFile("--prometheus-auth-config", o.AuthConfigFile)...)
	_, headerErrs := parseHeaders(o.Headers)
	errs = append(errs, headerErrs...)
	return errs
}

// Config turns validated options into a client for Prometheus. It reads
// --prometheus-auth-config and the TLS files; it does not contact
// Prometheus.
func (o *FlagOptions) Config() (FlagConfig, error) {
	u, err := parsePrometheusURL(o.URL)
	if err != nil {
		return FlagConfig{}, err
	}
	cc, err := o.httpClientConfig()
	if err != nil {
		return FlagConfig{}, err
	}
	client, err := promconfig.NewClientFromConfig(cc, "tidal-adapter")
	if err != nil {
		return FlagConfig{}, fmt.Errorf("building the Prometheus HTTP client: %w", err)
	}
	return FlagConfig{URL: u, Verb: o.Verb, Client: client, Timeout: o.Timeout, CacheTTL: o.CacheTTL}, nil
}

// httpClientConfig merges --prometheus-auth-config with the single-purpose
// flags. A setting made in both places is an error rather than a silent
// override, so the file and the flags never disagree unnoticed.
func (o *FlagOptions) httpClientConfig() (promconfig.HTTPClientConfig, error) {
	cc := promconfig.DefaultHTTPClientConfig
	if o.AuthConfigFile != "" {
		loaded, _, err := promconfig.LoadHTTPConfigFile(o.AuthConfigFile)
		if err != nil {
			return cc, fmt.Errorf("--prometheus-auth-config %q: %w", o.AuthConfigFile, err)
		}
		cc = *loaded
	}
	conflict := func(flag, key string) error {
		return fmt.Errorf("%s conflicts with %s in --prometheus-auth-config %q: set it in one place", flag, key, o.AuthConfigFile)
	}

	if o.TokenFile != "" {
		if cc.Authorization != nil || cc.BasicAuth != nil || cc.OAuth2 != nil || cc.BearerToken != "" || cc.BearerTokenFile != "" {
			return cc, conflict("--prometheus-token-file", "the credentials")
		}
		cc.Authorization = &promconfig.Authorization{Type: "Bearer", CredentialsFile: o.TokenFile}
	}
	tls := &cc.TLSConfig
	if o.CAFile != "" {
		if tls.CA != "" || tls.CAFile != "" || tls.CARef != "" {
			return cc, conflict("--prometheus-ca-file", "tls_config's CA")
		}
		tls.CAFile = o.CAFile
	}
	if o.ClientCertFile != "" {
		if tls.Cert != "" || tls.CertFile != "" || tls.CertRef != "" || tls.Key != "" || tls.KeyFile != "" || tls.KeyRef != "" {
			return cc, conflict("--prometheus-client-tls-cert-file", "tls_config's client certificate")
		}
		tls.CertFile, tls.KeyFile = o.ClientCertFile, o.ClientKeyFile
	}

	headers, errs := parseHeaders(o.Headers)
	if len(errs) > 0 {
		return cc, errs[0]
	}
	if len(headers) > 0 {
		if cc.HTTPHeaders == nil {
			cc.HTTPHeaders = &promconfig.Headers{}
		}
		if cc.HTTPHeaders.Headers == nil {
			cc.HTTPHeaders.Headers = map[string]promconfig.Header{}
		}
		for name, values := range headers {
			for existing := range cc.HTTPHeaders.Headers {
				if http.CanonicalHeaderKey(existing) == name {
					return cc, conflict("--prometheus-header "+name, "http_headers")
				}
			}
			cc.HTTPHeaders.Headers[name] = promconfig.Header{Values: values}
		}
	}

	if err := cc.Validate(); err != nil {
		return cc, fmt.Errorf("prometheus client configuration (--prometheus-auth-config and --prometheus-* flags): %w", err)
	}
	return cc, nil
}

func parsePrometheusURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--prometheus-url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("--prometheus-url %q must use http or https, e.g. http://prometheus.monitoring.svc:9090", raw)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("--prometheus-url %q has no host", raw)
	}
	return u, nil
}

// parseHeaders turns key=value pairs into canonical header names and their
// values, keeping the order values were given in.
func parseHeaders(pairs []string) (map[string][]string, []error) {
	var errs []error
	headers := map[string][]string{}
	for _, pair := range pairs {
		key, value, ok := strings.Cut(pair, "=")
		key = strings.TrimSpace(key)
		switch {
		case !ok || key == "":
			errs = append(errs, fmt.Errorf("--prometheus-header %q must be key=value, e.g. X-Scope-OrgID=tenant-a", pair))
			continue
		case !httpguts.ValidHeaderFieldName(key):
			errs = append(errs, fmt.Errorf("--prometheus-header %q: %q is not a valid header name", pair, key))
			continue
		case !httpguts.ValidHeaderFieldValue(value):
			errs = append(errs, fmt.Errorf("--prometheus-header %q: the value has characters a header cannot carry", pair))
			continue
		}
		name := http.CanonicalHeaderKey(key)
		if _, reserved := promconfig.ReservedHeaders[name]; reserved {
			errs = append(errs, fmt.Errorf("--prometheus-header %q: %s is set by the client itself; use --prometheus-token-file or --prometheus-auth-config for credentials", pair, name))
			continue
		}
		headers[name] = append(headers[name], value)
	}
	return headers, errs
}

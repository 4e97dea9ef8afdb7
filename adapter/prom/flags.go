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
	// HTTPConfigFile is a prometheus/common HTTPClientConfig YAML file, for
	// what the single-purpose flags cannot say (basic auth, OAuth2,
	// proxies, ...).
	HTTPConfigFile string
	// AuthKubeconfig is a kubeconfig whose current context's TLS settings
	// and credentials are used to reach Prometheus, as prometheus-adapter's
	// --prometheus-auth-config; its server is not used.
	AuthKubeconfig string
	// AuthInCluster uses the pod's service account token and the cluster's
	// CA to reach Prometheus, as prometheus-adapter's
	// --prometheus-auth-incluster.
	AuthInCluster bool
	// Timeout bounds each query; CacheTTL is how long a result is reused.
	Timeout  time.Duration
	CacheTTL time.Duration
	// MaxResponseBytes and MaxSeriesResponseBytes bound the bytes read of
	// a query's and of a series response (see Options).
	MaxResponseBytes, MaxSeriesResponseBytes int64
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
	// MaxResponseBytes and MaxSeriesResponseBytes bound the bytes read of
	// a query's and of a series response, for every backend; 0 means
	// DefaultMaxResponseBytes and DefaultMaxSeriesResponseBytes.
	MaxResponseBytes, MaxSeriesResponseBytes int64
}

// NewFlagOptions returns the options with the adapter's defaults.
func NewFlagOptions() FlagOptions {
	return FlagOptions{Verb: "GET", Timeout: 10 * time.Second, CacheTTL: 5 * time.Second,
		MaxResponseBytes: DefaultMaxResponseBytes, MaxSeriesResponseBytes: DefaultMaxSeriesResponseBytes}
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
	fs.StringVar(&o.HTTPConfigFile, "prometheus-http-config", o.HTTPConfigFile,
		"Prometheus HTTP client configuration file (the http_config YAML of prometheus/common: basic_auth, authorization, oauth2, tls_config, proxy_url, http_headers). "+
			"The other --prometheus-* flags must not set what this file sets.")
	fs.StringVar(&o.AuthKubeconfig, "prometheus-auth-config", o.AuthKubeconfig,
		"kubeconfig file whose current context says how to authenticate to Prometheus, as in prometheus-adapter: the cluster's certificate-authority(-data), insecure-skip-tls-verify, tls-server-name and proxy-url, "+
			"the user's client-certificate/client-key(-data), token, tokenFile (re-read on every request) or username/password. Its server is not used: --prometheus-url says where Prometheus is. "+
			"Exec plugins, auth providers and impersonation are refused. The other --prometheus-* flags must not set what this file sets.")
	fs.BoolVar(&o.AuthInCluster, "prometheus-auth-incluster", o.AuthInCluster,
		"Authenticate to Prometheus with the pod's service account token (re-read on every request) and verify it with the cluster's CA, as in prometheus-adapter. "+
			"--prometheus-token-file and --prometheus-ca-file replace the token and the CA.")
	fs.DurationVar(&o.Timeout, "prometheus-timeout", o.Timeout,
		"Time limit of each query to Prometheus; a metric request answers 503 ServiceUnavailable when it passes. Discovery requests get three times as long.")
	fs.DurationVar(&o.CacheTTL, "query-cache-ttl", o.CacheTTL,
		"How long a query result is reused for identical requests (timestamps keep the sample's time, so they show the age). 0 disables the cache; identical concurrent queries are always sent once.")
	fs.Int64Var(&o.MaxResponseBytes, "prometheus-max-response-bytes", o.MaxResponseBytes,
		"Longest query response read from Prometheus, in bytes (the response is held whole while it is decoded); a longer one fails the request. 0 means the default. Applies to every backend.")
	fs.Int64Var(&o.MaxSeriesResponseBytes, "prometheus-max-series-response-bytes", o.MaxSeriesResponseBytes,
		"Longest /api/v1/series (discovery) response read from Prometheus, in bytes; a longer one fails that rule's discovery. It is streamed, so this bounds the transfer more than memory. 0 means the default. Applies to every backend.")
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
	if o.MaxResponseBytes < 0 {
		errs = append(errs, fmt.Errorf("--prometheus-max-response-bytes must not be negative, got %d", o.MaxResponseBytes))
	}
	if o.MaxSeriesResponseBytes < 0 {
		errs = append(errs, fmt.Errorf("--prometheus-max-series-response-bytes must not be negative, got %d", o.MaxSeriesResponseBytes))
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
	errs = append(errs, cmdutil.CheckFile("--prometheus-http-config", o.HTTPConfigFile)...)
	errs = append(errs, cmdutil.CheckFile("--prometheus-auth-config", o.AuthKubeconfig)...)
	if o.AuthInCluster && o.AuthKubeconfig != "" {
		errs = append(errs, errors.New("--prometheus-auth-incluster and --prometheus-auth-config both say how to authenticate to Prometheus: set one"))
	}
	_, headerErrs := parseHeaders(o.Headers)
	errs = append(errs, headerErrs...)
	return errs
}

// Config turns validated options into a client for Prometheus. It reads
// --prometheus-http-config, --prometheus-auth-config and the TLS files; it
// does not contact Prometheus.
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
	return FlagConfig{URL: u, Verb: o.Verb, Client: client, Timeout: o.Timeout, CacheTTL: o.CacheTTL,
		MaxResponseBytes: o.MaxResponseBytes, MaxSeriesResponseBytes: o.MaxSeriesResponseBytes}, nil
}

// settings records which file set each part of the client configuration,
// so that a flag or a second file setting it again is named in the error.
type settings struct {
	credentials, ca, clientCert, serverName, proxy string
	// overridable marks the parts set by --prometheus-auth-incluster,
	// which the single-purpose flags replace instead of conflicting with.
	overridable map[*string]bool
}

// claim records that source sets the part *part. It fails when another
// source set it already, unless that one was overridable.
func (s *settings) claim(part *string, source, what string) error {
	if *part != "" && !s.overridable[part] {
		return fmt.Errorf("%s conflicts with %s in %s: set it in one place", source, what, *part)
	}
	*part = source
	delete(s.overridable, part)
	return nil
}

// sourceNames name the inputs of an HTTP client configuration in errors:
// the --prometheus-* flags, or a named backend's fields.
type sourceNames struct {
	httpConfig, token, ca, clientCert, header, all string
}

var flagNames = sourceNames{
	httpConfig: "--prometheus-http-config",
	token:      "--prometheus-token-file",
	ca:         "--prometheus-ca-file",
	clientCert: "--prometheus-client-tls-cert-file",
	header:     "--prometheus-header",
	all:        "prometheus client configuration (--prometheus-http-config, --prometheus-auth-config and --prometheus-* flags)",
}

// httpClientConfig is namedHTTPClientConfig with the flags' names.
func (o *FlagOptions) httpClientConfig() (promconfig.HTTPClientConfig, error) {
	return o.namedHTTPClientConfig(flagNames)
}

// namedHTTPClientConfig merges --prometheus-http-config, --prometheus-auth-config
// (or --prometheus-auth-incluster) and the single-purpose flags. A setting
// made in two places is an error rather than a silent override, so the
// files and the flags never disagree unnoticed; only what
// --prometheus-auth-incluster implies is replaced by --prometheus-token-file
// and --prometheus-ca-file. names say what errors call each input.
func (o *FlagOptions) namedHTTPClientConfig(names sourceNames) (promconfig.HTTPClientConfig, error) {
	cc := promconfig.DefaultHTTPClientConfig
	set := settings{overridable: map[*string]bool{}}
	if o.HTTPConfigFile != "" {
		loaded, _, err := promconfig.LoadHTTPConfigFile(o.HTTPConfigFile)
		if err != nil {
			return cc, fmt.Errorf("%s %q: %w", names.httpConfig, o.HTTPConfigFile, err)
		}
		cc = *loaded
		file := fmt.Sprintf("%s %q", names.httpConfig, o.HTTPConfigFile)
		if hasCredentials(&cc) {
			set.credentials = file
		}
		if tls := &cc.TLSConfig; tls.CA != "" || tls.CAFile != "" || tls.CARef != "" {
			set.ca = file
		}
		if tls := &cc.TLSConfig; tls.Cert != "" || tls.CertFile != "" || tls.CertRef != "" || tls.Key != "" || tls.KeyFile != "" || tls.KeyRef != "" {
			set.clientCert = file
		}
		if cc.TLSConfig.ServerName != "" {
			set.serverName = file
		}
		if cc.ProxyURL.URL != nil || cc.ProxyFromEnvironment {
			set.proxy = file
		}
	}

	var (
		auth   *kubeAuth
		source string
		err    error
	)
	switch {
	case o.AuthKubeconfig != "":
		source = fmt.Sprintf("--prometheus-auth-config %q", o.AuthKubeconfig)
		auth, err = loadKubeconfigAuth(o.AuthKubeconfig)
	case o.AuthInCluster:
		source = "--prometheus-auth-incluster"
		auth, err = inClusterAuth()
	}
	if err != nil {
		return cc, fmt.Errorf("%s: %w", source, err)
	}
	if auth != nil {
		if err := auth.apply(&cc, &set, source, o.AuthInCluster); err != nil {
			return cc, err
		}
	}

	if o.TokenFile != "" {
		if err := set.claim(&set.credentials, names.token, "the credentials"); err != nil {
			return cc, err
		}
		cc.Authorization = &promconfig.Authorization{Type: "Bearer", CredentialsFile: o.TokenFile}
		cc.BasicAuth, cc.OAuth2, cc.BearerToken, cc.BearerTokenFile = nil, nil, "", ""
	}
	tls := &cc.TLSConfig
	if o.CAFile != "" {
		if err := set.claim(&set.ca, names.ca, "the CA"); err != nil {
			return cc, err
		}
		tls.CA, tls.CAFile, tls.CARef = "", o.CAFile, ""
	}
	if o.ClientCertFile != "" {
		if err := set.claim(&set.clientCert, names.clientCert, "the client certificate"); err != nil {
			return cc, err
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
					return cc, fmt.Errorf("%s %s conflicts with http_headers in %s %q: set it in one place", names.header, name, names.httpConfig, o.HTTPConfigFile)
				}
			}
			cc.HTTPHeaders.Headers[name] = promconfig.Header{Values: values}
		}
	}

	// Like prometheus-adapter's client (Go's default transport, client-go's
	// for a kubeconfig): HTTP_PROXY, HTTPS_PROXY and NO_PROXY apply unless
	// a file names a proxy.
	if cc.ProxyURL.URL == nil && !cc.ProxyFromEnvironment && cc.NoProxy == "" {
		cc.ProxyFromEnvironment = true
	}

	if err := cc.Validate(); err != nil {
		return cc, fmt.Errorf("%s: %w", names.all, err)
	}
	return cc, nil
}

func hasCredentials(cc *promconfig.HTTPClientConfig) bool {
	return cc.Authorization != nil || cc.BasicAuth != nil || cc.OAuth2 != nil || cc.BearerToken != "" || cc.BearerTokenFile != ""
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
			errs = append(errs, fmt.Errorf("--prometheus-header %q: %s is set by the client itself; use --prometheus-token-file, --prometheus-auth-config or --prometheus-http-config for credentials", pair, name))
			continue
		}
		headers[name] = append(headers[name], value)
	}
	return headers, errs
}

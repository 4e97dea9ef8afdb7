package prom

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"

	promconfig "github.com/prometheus/common/config"

	"github.com/tidal-autoscaler/tidal/internal/cmdutil"
	"github.com/tidal-autoscaler/tidal/rules/config"
)

// Backends are the clients rules can query: the default one (from
// --prometheus-url) and the rule file's named backends.
type Backends struct {
	def    Client
	byName map[string]Client
}

// NewBackends builds a client per named backend of the rule file. Each
// takes the default's verb, timeouts, cache settings and metrics with its
// own URL and headers. Its HTTP client (credentials, TLS, proxy) is its
// own, from its tokenFile, caFile, client certificate and httpConfig:
// the default's credentials, CA and headers (the --prometheus-* flags)
// reach it only when it says inheritAuth, since a rule file may name any
// URL. def is reused as is, so its cache survives rule reloads.
func NewBackends(def Client, defOpts Options, named []config.Backend) (*Backends, error) {
	b := &Backends{def: def, byName: map[string]Client{}}
	for _, nb := range named {
		if nb.Name == "" || nb.Name == DefaultBackend {
			return nil, fmt.Errorf("backend name %q is reserved", nb.Name)
		}
		if _, dup := b.byName[nb.Name]; dup {
			return nil, fmt.Errorf("backend %q is defined twice", nb.Name)
		}
		u, err := url.Parse(nb.URL)
		if err != nil {
			return nil, fmt.Errorf("backend %q: %w", nb.Name, err)
		}
		o := defOpts
		o.Name, o.URL = nb.Name, u
		o.Headers = map[string]string{}
		if nb.InheritAuth {
			if nb.HasOwnAuth() {
				return nil, fmt.Errorf("backend %q: inheritAuth and the backend's own tokenFile, caFile, client certificate or httpConfig: use one or the other", nb.Name)
			}
			for k, v := range defOpts.Headers {
				o.Headers[k] = v
			}
		} else {
			if o.HTTPClient, err = backendHTTPClient(nb); err != nil {
				return nil, fmt.Errorf("backend %q: %w", nb.Name, err)
			}
		}
		for k, v := range nb.Headers {
			o.Headers[k] = v
		}
		c, err := New(o)
		if err != nil {
			return nil, err
		}
		b.byName[nb.Name] = c
	}
	return b, nil
}

// backendNames are a named backend's fields, as errors call them.
var backendNames = sourceNames{
	httpConfig: "httpConfig",
	token:      "tokenFile",
	ca:         "caFile",
	clientCert: "clientCertFile",
	header:     "headers",
	all:        "the client configuration (httpConfig, tokenFile, caFile, clientCertFile, clientKeyFile)",
}

// backendHTTPClient builds the HTTP client of a named backend that does
// not inherit the default's: only what the backend says, merged and
// checked as the --prometheus-* flags are (a setting made twice is an
// error), with HTTP_PROXY, HTTPS_PROXY and NO_PROXY honoured unless its
// httpConfig names a proxy.
func backendHTTPClient(nb config.Backend) (*http.Client, error) {
	if (nb.ClientCertFile == "") != (nb.ClientKeyFile == "") {
		return nil, errors.New("clientCertFile and clientKeyFile must be set together")
	}
	for _, f := range []struct{ field, path string }{
		{"tokenFile", nb.TokenFile},
		{"caFile", nb.CAFile},
		{"clientCertFile", nb.ClientCertFile},
		{"clientKeyFile", nb.ClientKeyFile},
		{"httpConfig", nb.HTTPConfig},
	} {
		if errs := cmdutil.CheckFile(f.field, f.path); len(errs) > 0 {
			return nil, errs[0]
		}
	}
	fo := FlagOptions{
		TokenFile:      nb.TokenFile,
		CAFile:         nb.CAFile,
		ClientCertFile: nb.ClientCertFile,
		ClientKeyFile:  nb.ClientKeyFile,
		HTTPConfigFile: nb.HTTPConfig,
	}
	cc, err := fo.namedHTTPClientConfig(backendNames)
	if err != nil {
		return nil, err
	}
	hc, err := promconfig.NewClientFromConfig(cc, "tidal-adapter")
	if err != nil {
		return nil, fmt.Errorf("building the HTTP client: %w", err)
	}
	return hc, nil
}

// Get returns the backend a rule names; "" is the default.
func (b *Backends) Get(name string) (Client, error) {
	if name == "" || name == DefaultBackend {
		return b.def, nil
	}
	c, ok := b.byName[name]
	if !ok {
		names := []string{DefaultBackend}
		for n := range b.byName {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("no backend named %q; known: %v", name, names)
	}
	return c, nil
}

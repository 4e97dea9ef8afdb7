package prom

import (
	"fmt"
	"net/url"
	"sort"

	"github.com/tidal-autoscaler/tidal/rules/config"
)

// Backends are the clients rules can query: the default one (from
// --prometheus-url) and the rule file's named backends.
type Backends struct {
	def    Client
	byName map[string]Client
}

// NewBackends builds a client per named backend of the rule file. Each
// inherits the default's options (HTTP client with its TLS and
// credentials, verb, timeouts, cache) with its own URL and headers. def is
// reused as is, so its cache survives rule reloads.
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
		for k, v := range defOpts.Headers {
			o.Headers[k] = v
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

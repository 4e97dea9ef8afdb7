package prom

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	promconfig "github.com/prometheus/common/config"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeAuth is what prometheus-adapter takes from a kubeconfig (or the pod's
// service account) to reach Prometheus: TLS and credentials, never the
// server. It comes from client-go's own loading, so relative paths, tokenFile
// and the *-data fields mean what they mean to kubectl.
type kubeAuth struct {
	caFile, caData     string
	certFile, keyFile  string
	certData, keyData  string
	token, tokenFile   string
	username, password string
	insecure           bool
	serverName         string
	proxy              *url.URL
}

// serviceAccountDir is where a pod's service account token and the
// cluster's CA are mounted; a variable for tests.
var serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// loadKubeconfigAuth reads path the way prometheus-adapter does
// (clientcmd's non-interactive loader with only that file, the current
// context) and keeps the TLS settings and credentials.
func loadKubeconfigAuth(path string) (*kubeAuth, error) {
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.ExecProvider != nil:
		return nil, errors.New("the user runs an exec plugin, which Tidal does not run for Prometheus: put a token or tokenFile in the kubeconfig, or use --prometheus-token-file or --prometheus-http-config (authorization, oauth2)")
	case cfg.AuthProvider != nil:
		return nil, fmt.Errorf("the user has an auth-provider (%s), which Tidal does not run for Prometheus: put a token or tokenFile in the kubeconfig, or use --prometheus-token-file or --prometheus-http-config (authorization, oauth2)", cfg.AuthProvider.Name)
	case cfg.Impersonate.UserName != "" || cfg.Impersonate.UID != "" || len(cfg.Impersonate.Groups) > 0 || len(cfg.Impersonate.Extra) > 0:
		return nil, errors.New("the context impersonates a user, which means nothing to Prometheus: remove as/as-groups/as-uid from the kubeconfig, or send the header you need with --prometheus-header")
	}
	a := &kubeAuth{
		caFile: cfg.CAFile, caData: string(cfg.CAData),
		certFile: cfg.CertFile, keyFile: cfg.KeyFile,
		certData: string(cfg.CertData), keyData: string(cfg.KeyData),
		token: cfg.BearerToken, tokenFile: cfg.BearerTokenFile,
		username: cfg.Username, password: cfg.Password,
		insecure: cfg.Insecure, serverName: cfg.ServerName,
	}
	if cfg.Proxy != nil {
		// clientcmd sets Proxy only from the cluster's proxy-url, as a fixed URL.
		a.proxy, err = cfg.Proxy(&http.Request{URL: &url.URL{Scheme: "https", Host: "prometheus"}})
		if err != nil {
			return nil, fmt.Errorf("proxy-url: %w", err)
		}
	}
	return a, nil
}

// inClusterAuth is rest.InClusterConfig's TLS and credentials: the service
// account token, re-read on every request, and the cluster's CA when it is
// mounted.
func inClusterAuth() (*kubeAuth, error) {
	token := filepath.Join(serviceAccountDir, "token")
	if _, err := os.Stat(token); err != nil {
		return nil, fmt.Errorf("no service account token (%w): run in a pod whose service account token is mounted, or use --prometheus-token-file", err)
	}
	a := &kubeAuth{tokenFile: token}
	if ca := filepath.Join(serviceAccountDir, "ca.crt"); fileExists(ca) {
		a.caFile = ca
	}
	return a, nil
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// apply sets a's parts in cc. A part another source set already is an
// error. With overridable, the parts set are marked as replaceable by the
// single-purpose flags (--prometheus-auth-incluster's token and CA).
func (a *kubeAuth) apply(cc *promconfig.HTTPClientConfig, set *settings, source string, overridable bool) error {
	mark := func(part *string) {
		if overridable {
			set.overridable[part] = true
		}
	}
	switch {
	case a.tokenFile != "", a.token != "", a.username != "":
		if err := set.claim(&set.credentials, source, "the credentials"); err != nil {
			return err
		}
		mark(&set.credentials)
		switch {
		case a.tokenFile != "":
			// The file wins over the token client-go read from it at
			// load: re-reading it picks up rotated tokens.
			cc.Authorization = &promconfig.Authorization{Type: "Bearer", CredentialsFile: a.tokenFile}
		case a.token != "":
			cc.Authorization = &promconfig.Authorization{Type: "Bearer", Credentials: promconfig.Secret(a.token)}
		default:
			cc.BasicAuth = &promconfig.BasicAuth{Username: a.username, Password: promconfig.Secret(a.password)}
		}
	}
	tls := &cc.TLSConfig
	if a.caFile != "" || a.caData != "" {
		if err := set.claim(&set.ca, source, "the CA"); err != nil {
			return err
		}
		mark(&set.ca)
		if a.caData != "" {
			// clientcmd: certificate-authority-data wins over certificate-authority.
			tls.CA = a.caData
		} else {
			tls.CAFile = a.caFile
		}
	}
	if a.certFile != "" || a.certData != "" || a.keyFile != "" || a.keyData != "" {
		if err := set.claim(&set.clientCert, source, "the client certificate"); err != nil {
			return err
		}
		if a.certData != "" {
			tls.Cert = a.certData
		} else {
			tls.CertFile = a.certFile
		}
		if a.keyData != "" {
			tls.Key = promconfig.Secret(a.keyData)
		} else {
			tls.KeyFile = a.keyFile
		}
	}
	if a.insecure {
		tls.InsecureSkipVerify = true
	}
	if a.serverName != "" {
		if err := set.claim(&set.serverName, source, "the TLS server name"); err != nil {
			return err
		}
		tls.ServerName = a.serverName
	}
	if a.proxy != nil {
		if err := set.claim(&set.proxy, source, "the proxy"); err != nil {
			return err
		}
		cc.ProxyURL = promconfig.URL{URL: a.proxy}
	}
	return nil
}

package prom

import (
	"encoding/base64"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// kubeconfig returns a one-context kubeconfig with the given cluster and
// user fields (YAML lines, indented by the caller's two spaces).
func kubeconfig(cluster, user string) string {
	return "apiVersion: v1\nkind: Config\ncurrent-context: prom\n" +
		"clusters:\n- name: prom\n  cluster:\n    server: https://prometheus.example:9090\n" + indent(cluster) +
		"users:\n- name: prom\n  user:\n" + indent(user) +
		"contexts:\n- name: prom\n  context:\n    cluster: prom\n    user: prom\n"
}

func indent(lines string) string {
	if lines == "" {
		return ""
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(lines, "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

func TestPrometheusAuthConfigKubeconfig(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"ca.pem", "cert.pem", "key.pem"} {
		writeFile(t, dir, f, f)
	}
	token := writeFile(t, dir, "token", "secret")
	withFiles := writeFile(t, dir, "files.kubeconfig", kubeconfig(
		"certificate-authority: ca.pem\ntls-server-name: prom.internal\nproxy-url: http://proxy.example:3128",
		"tokenFile: token\nclient-certificate: cert.pem\nclient-key: key.pem"))
	withData := writeFile(t, dir, "data.kubeconfig", kubeconfig(
		"certificate-authority-data: "+base64.StdEncoding.EncodeToString([]byte("CA PEM")),
		"token: abc\nclient-certificate-data: "+base64.StdEncoding.EncodeToString([]byte("CERT PEM"))+
			"\nclient-key-data: "+base64.StdEncoding.EncodeToString([]byte("KEY PEM"))))
	basic := writeFile(t, dir, "basic.kubeconfig", kubeconfig("insecure-skip-tls-verify: true", "username: u\npassword: p"))
	execPlugin := writeFile(t, dir, "exec.kubeconfig", kubeconfig("", "exec:\n  apiVersion: client.authentication.k8s.io/v1\n  command: get-token\n  interactiveMode: Never"))
	impersonate := writeFile(t, dir, "as.kubeconfig", kubeconfig("", "token: abc\nas: someone"))
	httpWithCA := writeFile(t, dir, "http.yaml", "tls_config:\n  ca_file: other.pem\n")

	tests := []struct {
		name    string
		opts    FlagOptions
		wantErr string
		check   func(t *testing.T, o FlagOptions)
	}{{
		name: "files, resolved against the kubeconfig",
		opts: FlagOptions{AuthKubeconfig: withFiles},
		check: func(t *testing.T, o FlagOptions) {
			cc, _ := o.httpClientConfig()
			if cc.Authorization == nil || cc.Authorization.Type != "Bearer" || cc.Authorization.CredentialsFile != token {
				t.Errorf("authorization = %+v, want a bearer token re-read from %s", cc.Authorization, token)
			}
			tls := cc.TLSConfig
			if tls.CAFile != filepath.Join(dir, "ca.pem") || tls.CertFile != filepath.Join(dir, "cert.pem") || tls.KeyFile != filepath.Join(dir, "key.pem") {
				t.Errorf("tls files = %q %q %q", tls.CAFile, tls.CertFile, tls.KeyFile)
			}
			if tls.ServerName != "prom.internal" {
				t.Errorf("server name = %q", tls.ServerName)
			}
			if cc.ProxyURL.URL == nil || cc.ProxyURL.String() != "http://proxy.example:3128" {
				t.Errorf("proxy = %v", cc.ProxyURL.URL)
			}
		},
	}, {
		name: "inline data",
		opts: FlagOptions{AuthKubeconfig: withData},
		check: func(t *testing.T, o FlagOptions) {
			cc, _ := o.httpClientConfig()
			if cc.Authorization == nil || string(cc.Authorization.Credentials) != "abc" {
				t.Errorf("authorization = %+v, want the token abc", cc.Authorization)
			}
			if tls := cc.TLSConfig; tls.CA != "CA PEM" || tls.Cert != "CERT PEM" || string(tls.Key) != "KEY PEM" {
				t.Errorf("tls = %+v", tls)
			}
		},
	}, {
		name: "basic auth and insecure-skip-tls-verify",
		opts: FlagOptions{AuthKubeconfig: basic},
		check: func(t *testing.T, o FlagOptions) {
			cc, _ := o.httpClientConfig()
			if cc.BasicAuth == nil || cc.BasicAuth.Username != "u" || string(cc.BasicAuth.Password) != "p" {
				t.Errorf("basic auth = %+v", cc.BasicAuth)
			}
			if !cc.TLSConfig.InsecureSkipVerify {
				t.Error("insecure-skip-tls-verify was dropped")
			}
		},
	}, {
		name: "headers and verb combine with the kubeconfig",
		opts: FlagOptions{AuthKubeconfig: withData, Headers: []string{"X-Scope-OrgID=a"}},
		check: func(t *testing.T, o FlagOptions) {
			cc, _ := o.httpClientConfig()
			if cc.HTTPHeaders == nil || len(cc.HTTPHeaders.Headers["X-Scope-Orgid"].Values) != 1 {
				t.Errorf("headers = %+v", cc.HTTPHeaders)
			}
		},
	}, {
		name:    "token in the kubeconfig and --prometheus-token-file",
		opts:    FlagOptions{AuthKubeconfig: withData, TokenFile: token},
		wantErr: "--prometheus-token-file conflicts with the credentials in --prometheus-auth-config",
	}, {
		name:    "CA in the kubeconfig and --prometheus-ca-file",
		opts:    FlagOptions{AuthKubeconfig: withFiles, CAFile: token},
		wantErr: "--prometheus-ca-file conflicts with the CA in --prometheus-auth-config",
	}, {
		name:    "CA in the kubeconfig and in --prometheus-http-config",
		opts:    FlagOptions{AuthKubeconfig: withFiles, HTTPConfigFile: httpWithCA},
		wantErr: "conflicts with the CA in --prometheus-http-config",
	}, {
		name:    "exec plugins are refused",
		opts:    FlagOptions{AuthKubeconfig: execPlugin},
		wantErr: "exec plugin",
	}, {
		name:    "impersonation is refused",
		opts:    FlagOptions{AuthKubeconfig: impersonate},
		wantErr: "impersonates",
	}, {
		name:    "not a kubeconfig",
		opts:    FlagOptions{AuthKubeconfig: httpWithCA},
		wantErr: "--prometheus-auth-config",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.opts.httpClientConfig()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("error = %v", err)
			}
			tt.check(t, tt.opts)
		})
	}
}

// TestPrometheusAuthConfigReachesPrometheus is prometheus-adapter's use of
// --prometheus-auth-config end to end: a kubeconfig with the server's CA and
// a token is all it takes to query a TLS Prometheus.
func TestPrometheusAuthConfigReachesPrometheus(t *testing.T) {
	var gotAuth string
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		_, _ = io.WriteString(w, `{"status":"success","data":[]}`)
	}))
	defer ts.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	dir := t.TempDir()
	kc := writeFile(t, dir, "kubeconfig", kubeconfig(
		"certificate-authority-data: "+base64.StdEncoding.EncodeToString(ca), "token: s3cret"))

	o := NewFlagOptions()
	o.URL, o.AuthKubeconfig = ts.URL, kc
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatalf("validate: %v", errs)
	}
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cfg.Client.Get(ts.URL + "/api/v1/series")
	if err != nil {
		t.Fatalf("the kubeconfig's CA does not verify the server: %v", err)
	}
	_ = resp.Body.Close()
	if gotAuth != "Bearer s3cret" {
		t.Errorf("Authorization = %q, want the kubeconfig's token", gotAuth)
	}
}

func TestPrometheusAuthInCluster(t *testing.T) {
	sa := t.TempDir()
	old := serviceAccountDir
	serviceAccountDir = sa
	t.Cleanup(func() { serviceAccountDir = old })
	token := writeFile(t, sa, "token", "sa-token")
	ca := writeFile(t, sa, "ca.crt", "cluster CA")
	other := t.TempDir()
	myCA := writeFile(t, other, "ca.pem", "prometheus CA")
	myToken := writeFile(t, other, "token", "t")

	cc, err := (&FlagOptions{AuthInCluster: true}).httpClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cc.Authorization == nil || cc.Authorization.CredentialsFile != token || cc.TLSConfig.CAFile != ca {
		t.Errorf("in-cluster: authorization %+v, CA %q; want the service account's token and CA", cc.Authorization, cc.TLSConfig.CAFile)
	}

	// The single-purpose flags replace what in-cluster implies.
	cc, err = (&FlagOptions{AuthInCluster: true, CAFile: myCA, TokenFile: myToken}).httpClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cc.Authorization.CredentialsFile != myToken || cc.TLSConfig.CAFile != myCA {
		t.Errorf("with flags: authorization %+v, CA %q; want the flags' files", cc.Authorization, cc.TLSConfig.CAFile)
	}

	if errs := (&FlagOptions{URL: "http://p:9090", Verb: "GET", Timeout: 1, AuthInCluster: true, AuthKubeconfig: myCA}).Validate(); len(errs) != 1 ||
		!strings.Contains(errs[0].Error(), "--prometheus-auth-incluster and --prometheus-auth-config") {
		t.Errorf("both in-cluster and a kubeconfig: %v", errs)
	}

	serviceAccountDir = other + "/none"
	if _, err := (&FlagOptions{AuthInCluster: true}).httpClientConfig(); err == nil || !strings.Contains(err.Error(), "--prometheus-auth-incluster: no service account token") {
		t.Errorf("outside a pod: %v", err)
	}
}

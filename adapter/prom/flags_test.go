package prom

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrometheusHTTPClientConfig(t *testing.T) {
	dir := t.TempDir()
	token := writeFile(t, dir, "token", "secret")
	basic := writeFile(t, dir, "basic.yaml", "basic_auth:\n  username: u\n  password: p\n")
	withHeader := writeFile(t, dir, "headers.yaml", "http_headers:\n  x-scope-orgid:\n    values: [a]\n")
	withCA := writeFile(t, dir, "ca.yaml", "tls_config:\n  ca_file: ca.pem\n")
	bad := writeFile(t, dir, "bad.yaml", "no_such_field: 1\n")

	tests := []struct {
		name    string
		opts    FlagOptions
		wantErr string
		check   func(t *testing.T, o FlagOptions)
	}{{
		name: "flags only",
		opts: FlagOptions{TokenFile: token, CAFile: token, ClientCertFile: token, ClientKeyFile: token, Headers: []string{"x-scope-orgid=a", "X-Scope-OrgID=b"}},
		check: func(t *testing.T, o FlagOptions) {
			cc, _ := o.httpClientConfig()
			if cc.Authorization == nil || cc.Authorization.CredentialsFile != token || cc.Authorization.Type != "Bearer" {
				t.Errorf("authorization = %+v, want a bearer token from %s", cc.Authorization, token)
			}
			if cc.TLSConfig.CAFile != token || cc.TLSConfig.CertFile != token || cc.TLSConfig.KeyFile != token {
				t.Errorf("tls = %+v", cc.TLSConfig)
			}
			if got := cc.HTTPHeaders.Headers["X-Scope-Orgid"].Values; strings.Join(got, ",") != "a,b" {
				t.Errorf("header values = %v, want [a b]", got)
			}
			if !cc.ProxyFromEnvironment {
				t.Error("HTTP_PROXY and friends are ignored; prometheus-adapter honours them")
			}
		},
	}, {
		name: "file relative paths resolve against the file",
		opts: FlagOptions{HTTPConfigFile: withCA, TokenFile: token},
		check: func(t *testing.T, o FlagOptions) {
			cc, _ := o.httpClientConfig()
			if want := filepath.Join(dir, "ca.pem"); cc.TLSConfig.CAFile != want {
				t.Errorf("ca file = %q, want %q", cc.TLSConfig.CAFile, want)
			}
		},
	}, {
		name:    "token conflicts with basic auth in the file",
		opts:    FlagOptions{HTTPConfigFile: basic, TokenFile: token},
		wantErr: "--prometheus-token-file conflicts with the credentials",
	}, {
		name:    "CA in both places",
		opts:    FlagOptions{HTTPConfigFile: withCA, CAFile: token},
		wantErr: "--prometheus-ca-file conflicts",
	}, {
		name:    "header in both places",
		opts:    FlagOptions{HTTPConfigFile: withHeader, Headers: []string{"X-Scope-OrgID=b"}},
		wantErr: "--prometheus-header X-Scope-Orgid conflicts",
	}, {
		name:    "unknown field in the file",
		opts:    FlagOptions{HTTPConfigFile: bad},
		wantErr: "--prometheus-http-config",
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

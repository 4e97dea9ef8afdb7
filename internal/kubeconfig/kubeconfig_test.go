package kubeconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const minimal = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
users:
- name: u
  user:
    token: t
contexts:
- name: ctx
  context:
    cluster: c
    user: u
current-context: ctx
`

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(good, []byte(minimal), 0o600); err != nil {
		t.Fatal(err)
	}
	// Make sure the in-cluster branch sees no cluster.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")

	tests := []struct {
		name    string
		path    string
		wantErr string
	}{
		{name: "kubeconfig file", path: good},
		{name: "missing file", path: filepath.Join(dir, "nope"), wantErr: "--kubeconfig"},
		{name: "no file and not in a cluster", path: "", wantErr: "pass --kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(tt.path, "tidal-test")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load() error = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() error = %v", err)
			}
			if cfg.Host != "https://127.0.0.1:6443" || !strings.HasPrefix(cfg.UserAgent, "tidal-test/") {
				t.Errorf("Load() = host %q, user agent %q", cfg.Host, cfg.UserAgent)
			}
		})
	}
}

package prom_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/rules/config"
)

// seen is what a TLS stand-in for Prometheus saw of the last request.
type seen struct {
	requests      int
	authorization string
	clientCN      string
	header        string
}

// recordingServer is a TLS Prometheus stand-in that asks for (and does not
// verify) a client certificate, and records the credentials it was sent.
type recordingServer struct {
	*httptest.Server
	mu   sync.Mutex
	last seen
}

func newRecordingServer(t *testing.T) *recordingServer {
	s := &recordingServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.last.requests++
		s.last.authorization = r.Header.Get("Authorization")
		s.last.header = r.Header.Get("X-Default")
		s.last.clientCN = ""
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			s.last.clientCN = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
	}))
	s.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *recordingServer) seen() seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// clientCert writes a self-signed client certificate for cn and its key.
func clientCert(t *testing.T, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = writeTestFile(t, dir, cn+".crt", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	keyFile = writeTestFile(t, dir, cn+".key", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	return certFile, keyFile
}

// TestNamedBackendCredentials: the default backend's credentials (token,
// client certificate, CA, headers from the --prometheus-* flags) reach a
// named backend only when it says inheritAuth; otherwise it is reached
// with what it says itself, and with nothing when it says nothing.
func TestNamedBackendCredentials(t *testing.T) {
	dir := t.TempDir()
	def := newRecordingServer(t)
	other := newRecordingServer(t)
	// httptest's servers share one certificate: the default's CA file
	// would verify the other server too, so only not inheriting it makes
	// the "no CA of its own" case fail.
	caFile := writeTestFile(t, dir, "ca.crt", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: def.Certificate().Raw})))
	defCert, defKey := clientCert(t, dir, "default-client")
	ownCert, ownKey := clientCert(t, dir, "backend-client")
	defToken := writeTestFile(t, dir, "default-token", "default-token\n")
	ownToken := writeTestFile(t, dir, "backend-token", "backend-token\n")
	httpConfig := writeTestFile(t, dir, "http-config.yaml", "basic_auth:\n  username: team-a\n  password: s3cret\ntls_config:\n  ca_file: "+caFile+"\n")

	fo := prom.NewFlagOptions()
	fo.URL = def.URL
	fo.TokenFile, fo.CAFile = defToken, caFile
	fo.ClientCertFile, fo.ClientKeyFile = defCert, defKey
	fo.Headers = []string{"X-Default=tenant-secret"}
	fc, err := fo.Config()
	if err != nil {
		t.Fatal(err)
	}
	defOpts := prom.Options{Name: prom.DefaultBackend, URL: fc.URL, HTTPClient: fc.Client, Verb: fc.Verb, Timeout: 5 * time.Second}
	defClient, err := prom.New(defOpts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := defClient.Query(context.Background(), "up", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got, want := def.seen(), (seen{requests: 1, authorization: "Bearer default-token", clientCN: "default-client", header: "tenant-secret"}); got != want {
		t.Fatalf("the default backend saw %+v, want %+v", got, want)
	}

	tests := []struct {
		name    string
		backend config.Backend
		// server is the stand-in the backend's URL points at.
		server  *recordingServer
		want    seen
		wantErr error
	}{{
		name:    "another origin gets nothing of the default's",
		backend: config.Backend{URL: other.URL, CAFile: caFile},
		server:  other,
		want:    seen{requests: 1},
	}, {
		name:    "the default's origin on another path gets nothing without inheritAuth",
		backend: config.Backend{URL: def.URL + "/tenant-b", CAFile: caFile},
		server:  def,
		want:    seen{requests: 1},
	}, {
		name:    "inheritAuth gets the default's token, certificate, CA and headers",
		backend: config.Backend{URL: other.URL, InheritAuth: true},
		server:  other,
		want:    seen{requests: 1, authorization: "Bearer default-token", clientCN: "default-client", header: "tenant-secret"},
	}, {
		name:    "its own token file",
		backend: config.Backend{URL: other.URL, CAFile: caFile, TokenFile: ownToken},
		server:  other,
		want:    seen{requests: 1, authorization: "Bearer backend-token"},
	}, {
		name:    "its own client certificate",
		backend: config.Backend{URL: other.URL, CAFile: caFile, ClientCertFile: ownCert, ClientKeyFile: ownKey},
		server:  other,
		want:    seen{requests: 1, clientCN: "backend-client"},
	}, {
		name:    "its own http config",
		backend: config.Backend{URL: other.URL, HTTPConfig: httpConfig},
		server:  other,
		want:    seen{requests: 1, authorization: "Basic dGVhbS1hOnMzY3JldA=="},
	}, {
		name:    "no CA of its own: the default's CA does not verify it",
		backend: config.Backend{URL: other.URL},
		server:  other,
		want:    seen{},
		wantErr: prom.ErrUnavailable,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.server.mu.Lock()
			tt.server.last = seen{}
			tt.server.mu.Unlock()
			tt.backend.Name = "named"
			b, err := prom.NewBackends(defClient, defOpts, []config.Backend{tt.backend})
			if err != nil {
				t.Fatal(err)
			}
			c, err := b.Get("named")
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Query(context.Background(), "up", time.Time{})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("Query error = %v, want %v", err, tt.wantErr)
			}
			if got := tt.server.seen(); got != tt.want {
				t.Errorf("the backend saw %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestNamedBackendFiles: a backend whose files cannot be used is refused
// when the rules are loaded (the last good rules keep serving), naming
// the backend and the field.
func TestNamedBackendFiles(t *testing.T) {
	dir := t.TempDir()
	bad := writeTestFile(t, dir, "bad-http-config.yaml", "basic_auth: [not, a, mapping]\n")
	conflicting := writeTestFile(t, dir, "http-config.yaml", "authorization:\n  credentials: x\n")
	token := writeTestFile(t, dir, "token", "t\n")
	u, _ := url.Parse("http://127.0.0.1:9")
	defOpts := prom.Options{Name: prom.DefaultBackend, URL: u}
	defClient, err := prom.New(defOpts)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		backend config.Backend
		want    string
	}{
		{"missing token file", config.Backend{TokenFile: filepath.Join(dir, "nope")}, `backend "named": tokenFile`},
		{"missing CA file", config.Backend{CAFile: filepath.Join(dir, "nope")}, `backend "named": caFile`},
		{"bad http config", config.Backend{HTTPConfig: bad}, `backend "named": httpConfig`},
		{"token in two places", config.Backend{HTTPConfig: conflicting, TokenFile: token}, `backend "named": tokenFile conflicts with the credentials in httpConfig`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.backend.Name, tt.backend.URL = "named", "http://127.0.0.1:9"
			_, err := prom.NewBackends(defClient, defOpts, []config.Backend{tt.backend})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

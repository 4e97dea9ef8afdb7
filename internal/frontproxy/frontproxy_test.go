package frontproxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// ca is a test certificate authority.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

var serial atomic.Int64

func newCA(t *testing.T, name string) *ca {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	cert, key := issue(t, tmpl, nil)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &ca{cert: cert, key: key, pool: pool}
}

// client issues a client certificate for cn valid until notAfter.
func (c *ca) client(t *testing.T, cn string, notAfter time.Time) *x509.Certificate {
	t.Helper()
	cert, _ := issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		NotBefore:   time.Now().Add(-2 * time.Hour),
		NotAfter:    notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}, c)
	return cert
}

// issue makes a certificate from tmpl with a new key, signed by parent
// (nil: self-signed).
func issue(t *testing.T, tmpl *x509.Certificate, parent *ca) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(serial.Add(1))
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// caProvider returns the pool of whichever CA is current, as the
// apiserver's dynamic CA content does after a rotation.
type caProvider struct{ current *ca }

func (p *caProvider) Name() string                             { return "test" }
func (p *caProvider) CurrentCABundleContent() []byte           { return nil }
func (p *caProvider) AddListener(dynamiccertificates.Listener) {}
func (p *caProvider) VerifyOptions() (x509.VerifyOptions, bool) {
	return x509.VerifyOptions{Roots: p.current.pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, true
}

func request(cert *x509.Certificate, user string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "https://adapter/apis", nil)
	if cert != nil {
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	}
	if user != "" {
		r.Header.Set("X-Remote-User", user)
		r.Header.Add("X-Remote-Group", "team")
	}
	return r
}

type outcome struct {
	ok     bool
	user   string
	groups []string
}

func run(a authenticator.Request, r *http.Request) outcome {
	resp, ok, err := a.AuthenticateRequest(r)
	if !ok || err != nil {
		return outcome{}
	}
	return outcome{ok: true, user: resp.User.GetName(), groups: resp.User.GetGroups()}
}

// TestMatchesDelegatedChain checks, for each request, that the caching
// authenticator answers as the apiserver's own delegated chain does, and
// how often it verified a chain.
func TestMatchesDelegatedChain(t *testing.T) {
	proxyCA, otherCA := newCA(t, "front-proxy-ca"), newCA(t, "other-ca")
	long := time.Now().Add(12 * time.Hour)
	proxy := proxyCA.client(t, "front-proxy-client", long)
	intruder := otherCA.client(t, "front-proxy-client", long)
	wrongName := proxyCA.client(t, "someone-else", long)
	expired := proxyCA.client(t, "front-proxy-client", time.Now().Add(-time.Minute))
	soon := proxyCA.client(t, "front-proxy-client", time.Now().Add(90*time.Second))

	type step struct {
		cert    *x509.Certificate
		user    string
		advance time.Duration // the clock moves before the request
		rotate  *ca           // the trusted CA changes before the request
		want    outcome
	}
	alice := outcome{ok: true, user: "alice", groups: []string{"team", "system:authenticated"}}
	tests := []struct {
		name     string
		steps    []step
		verifies int
	}{
		{"the proxy's certificate is verified once for many requests", []step{
			{cert: proxy, user: "alice", want: alice},
			{cert: proxy, user: "alice", want: alice},
			{cert: proxy, user: "alice", advance: time.Minute, want: alice},
		}, 1},
		{"no client certificate", []step{{user: "alice"}}, 0},
		{"a certificate from another CA", []step{{cert: intruder, user: "alice"}, {cert: intruder, user: "alice"}}, 2},
		{"a common name that is not allowed", []step{{cert: wrongName, user: "alice"}}, 0},
		{"an expired certificate", []step{{cert: expired, user: "alice"}}, 1},
		{"no user header falls through", []step{{cert: proxy}, {cert: proxy, user: "alice", want: alice}}, 1},
		{"verified again after the TTL", []step{
			{cert: proxy, user: "alice", want: alice},
			{cert: proxy, user: "alice", advance: ttl + time.Second, want: alice},
		}, 2},
		// The cache trusts it no longer than its NotAfter: past that (on
		// the test's clock) it verifies again, fails, and hands the
		// request to the chain, which runs on the real clock and accepts.
		{"verified again after the certificate expires", []step{
			{cert: soon, user: "alice", want: alice},
			{cert: soon, user: "alice", advance: 2 * time.Minute, want: alice},
		}, 2},
		{"a rotated CA no longer trusts the old proxy certificate", []step{
			{cert: proxy, user: "alice", want: alice},
			{cert: proxy, user: "alice", rotate: otherCA},
			{cert: intruder, user: "alice", want: alice},
		}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			provider := &caProvider{current: proxyCA}
			cfg := &authenticatorfactory.RequestHeaderConfig{
				UsernameHeaders:     headerrequest.StaticStringSlice{"X-Remote-User"},
				UIDHeaders:          headerrequest.StaticStringSlice{"X-Remote-Uid"},
				GroupHeaders:        headerrequest.StaticStringSlice{"X-Remote-Group"},
				ExtraHeaderPrefixes: headerrequest.StaticStringSlice{"X-Remote-Extra-"},
				CAContentProvider:   provider,
				AllowedClientNames:  headerrequest.StaticStringSlice{"front-proxy-client"},
			}
			chain, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{RequestHeaderConfig: cfg}.New()
			if err != nil {
				t.Fatal(err)
			}
			var verifies int
			a := New(cfg, chain).(*Authenticator)
			clock := time.Now()
			a.now = func() time.Time { return clock }
			a.verify = func(c *x509.Certificate, o x509.VerifyOptions) ([][]*x509.Certificate, error) {
				verifies++
				return c.Verify(o)
			}
			for i, s := range tc.steps {
				clock = clock.Add(s.advance)
				if s.rotate != nil {
					provider.current = s.rotate
				}
				got := run(a, request(s.cert, s.user))
				want := run(chain, request(s.cert, s.user))
				if got.ok != want.ok || got.user != want.user || !slices.Equal(got.groups, want.groups) {
					t.Fatalf("step %d: got %+v, the delegated chain says %+v", i, got, want)
				}
				if got.ok != s.want.ok || got.user != s.want.user || !slices.Equal(got.groups, s.want.groups) {
					t.Fatalf("step %d: got %+v, want %+v", i, got, s.want)
				}
			}
			if verifies != tc.verifies {
				t.Errorf("verified %d times, want %d", verifies, tc.verifies)
			}
		})
	}
}

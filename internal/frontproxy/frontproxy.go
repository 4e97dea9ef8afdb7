// Package frontproxy authenticates requests that the aggregator (the
// front proxy) forwards, remembering which client certificate chains have
// already been verified.
//
// k8s.io/apiserver's request-header authenticator verifies the proxy's
// client certificate chain on every request, although the aggregator sends
// all of them over a few long-lived connections with the same certificate.
// That x509 verification was 9-15% of the adapter's CPU per request. This
// authenticator does the same checks in the same order but verifies each
// (chain, trusted CA pool) pair once, until the certificate expires or a
// short TTL passes; a new CA bundle (the CA provider returns a new pool)
// verifies again. The verified pairs live in apimachinery's
// LRUExpireCache, which bounds their number.
package frontproxy

import (
	"crypto/sha256"
	"crypto/x509"
	"net/http"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
)

const (
	// ttl bounds how long a verification is trusted, so that a clock
	// step or a revoked intermediate is noticed within minutes.
	ttl = 5 * time.Minute
	// maxEntries bounds the cache; the aggregator uses one certificate,
	// so more than a few entries means rotation or misuse.
	maxEntries = 64
)

// Authenticator tries the request-header path with the cached
// verification first, and hands every request it does not authenticate to
// next (the full delegated chain, which checks it again from scratch). So
// the answers are those of next alone: the request-header authenticator is
// first in that chain and the first success wins.
type Authenticator struct {
	cfg     *authenticatorfactory.RequestHeaderConfig
	headers authenticator.Request
	next    authenticator.Request
	now     func() time.Time
	// verify is x509.Certificate.Verify; tests count the calls.
	verify func(*x509.Certificate, x509.VerifyOptions) ([][]*x509.Certificate, error)

	// verified holds the keys of verified chains until their
	// verification expires.
	verified *cache.LRUExpireCache
}

type key struct {
	chain [sha256.Size]byte
	roots *x509.CertPool
	inter *x509.CertPool
}

// New wraps next, the authenticator built from the same delegated options.
// With no request-header configuration it returns next unchanged.
func New(cfg *authenticatorfactory.RequestHeaderConfig, next authenticator.Request) authenticator.Request {
	if cfg == nil || cfg.CAContentProvider == nil || next == nil {
		return next
	}
	a := &Authenticator{
		cfg:     cfg,
		headers: group.NewAuthenticatedGroupAdder(headerrequest.NewDynamic(cfg.UsernameHeaders, cfg.UIDHeaders, cfg.GroupHeaders, cfg.ExtraHeaderPrefixes)),
		next:    next,
		now:     time.Now,
		verify:  (*x509.Certificate).Verify,
	}
	a.verified = cache.NewLRUExpireCacheWithClock(maxEntries, clockFunc(func() time.Time { return a.now() }))
	return a
}

// clockFunc adapts a time source to the cache's clock.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// AuthenticateRequest implements authenticator.Request.
func (a *Authenticator) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if a.trustedProxy(req) {
		if resp, ok, err := a.headers.AuthenticateRequest(req); ok && err == nil {
			return resp, true, nil
		}
	}
	return a.next.AuthenticateRequest(req)
}

// trustedProxy reports whether the request's client certificate chain
// verifies against the request-header CA and names an allowed proxy, as
// x509request.Verifier checks it.
func (a *Authenticator) trustedProxy(req *http.Request) bool {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return false
	}
	opts, ok := a.cfg.CAContentProvider.VerifyOptions()
	if !ok {
		return false
	}
	certs := req.TLS.PeerCertificates
	leaf := certs[0]
	if !a.allowedName(leaf.Subject.CommonName) {
		return false
	}
	// The chain's own intermediates are in the hash; a pool the provider
	// gives is keyed by identity, as the roots are.
	k := key{chain: chainHash(certs), roots: opts.Roots, inter: opts.Intermediates}
	if _, hit := a.verified.Get(k); hit {
		return true
	}
	now := a.now()
	if opts.Intermediates == nil && len(certs) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range certs[1:] {
			opts.Intermediates.AddCert(c)
		}
	}
	if opts.CurrentTime.IsZero() {
		opts.CurrentTime = now
	}
	chains, err := a.verify(leaf, opts)
	if err != nil {
		return false
	}
	// Trusted for ttl, and never past the chain's expiry.
	if left := validUntil(chains).Sub(now); left < ttl {
		a.verified.Add(k, struct{}{}, left)
	} else {
		a.verified.Add(k, struct{}{}, ttl)
	}
	return true
}

func (a *Authenticator) allowedName(cn string) bool {
	if a.cfg.AllowedClientNames == nil {
		return true
	}
	names := a.cfg.AllowedClientNames.Value()
	return len(names) == 0 || slices.Contains(names, cn)
}

// validUntil is when the last of the verified chains stops being valid
// (its certificate, roots included, that expires first).
func validUntil(chains [][]*x509.Certificate) time.Time {
	var best time.Time
	for _, chain := range chains {
		var end time.Time
		for i, c := range chain {
			if i == 0 || c.NotAfter.Before(end) {
				end = c.NotAfter
			}
		}
		if end.After(best) {
			best = end
		}
	}
	return best
}

func chainHash(certs []*x509.Certificate) [sha256.Size]byte {
	h := sha256.New()
	for _, c := range certs {
		h.Write(c.Raw)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

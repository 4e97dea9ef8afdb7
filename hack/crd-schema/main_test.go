package main

import (
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
)

// TestQuantityPatterns: the schema's patterns accept a quantity string
// exactly when the apiserver's HPA validation would (its Sign()), so the
// CRD rejects what autoscaling/v2 rejects.
func TestQuantityPatterns(t *testing.T) {
	pos, nonNeg := regexp.MustCompile(positive), regexp.MustCompile(nonNegative)
	for _, s := range []string{
		"1", "0", "-1", "+3", "0.5", ".5", "5.", "0.0", "00.010", "10", "100m", "0m", "1n",
		"1Ki", "0Ki", "1e3", "0e3", "0.0e-2", "2E-3", "-0.05", "1.5Gi", "0.000001",
	} {
		t.Run(s, func(t *testing.T) {
			q, err := resource.ParseQuantity(s)
			if err != nil {
				t.Fatalf("not a quantity: %v", err)
			}
			if got, want := pos.MatchString(s), q.Sign() == 1; got != want {
				t.Errorf("positive pattern matches: %v, want %v (sign %d)", got, want, q.Sign())
			}
			if got, want := nonNeg.MatchString(s), q.Sign() >= 0; got != want {
				t.Errorf("non-negative pattern matches: %v, want %v (sign %d)", got, want, q.Sign())
			}
		})
	}
}

// TestPathSegmentNamePattern: metric names as validateMetricIdentifier
// accepts them.
func TestPathSegmentNamePattern(t *testing.T) {
	re := regexp.MustCompile(pathSegmentName)
	for _, s := range []string{"rps", "http_requests", ".", "..", "...", ".a", "..a", "a.b", "a/b", "50%", "a:b"} {
		t.Run(s, func(t *testing.T) {
			if got, want := re.MatchString(s), len(content.IsPathSegmentName(s)) == 0; got != want {
				t.Errorf("matches: %v, want %v (%v)", got, want, content.IsPathSegmentName(s))
			}
		})
	}
}

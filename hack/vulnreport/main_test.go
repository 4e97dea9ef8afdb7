package main

import (
	"bytes"
	"strings"
	"testing"
)

// stream is govulncheck -format json output, cut to what vulnreport reads.
const stream = `{"config":{"protocol_version":"v1.0.0"}}
{"osv":{"id":"GO-1"}}
{"finding":{"osv":"GO-1","fixed_version":"v0.62.0","trace":[{"module":"golang.org/x/net","version":"v0.60.0"}]}}
{"finding":{"osv":"GO-1","fixed_version":"v0.62.0","trace":[{"module":"golang.org/x/net","version":"v0.60.0","package":"golang.org/x/net/html"}]}}
{"finding":{"osv":"GO-2","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Serve"}]}}
{"finding":{"osv":"GO-3","fixed_version":"v3.7.1","trace":[{"module":"go.etcd.io/etcd/client/pkg/v3","version":"v3.7.0"}]}}
`

func TestReport(t *testing.T) {
	for _, tc := range []struct {
		name        string
		input       string
		strict      bool
		wantFailing int
		wantLines   []string
	}{
		{"nothing found", `{"config":{}}`, false, 0, nil},
		{"imported and required only, stdlib called: warnings", stream, false, 0, []string{
			"GO-2 called stdlib@v1.26.8, fixed in v1.26.9: WARNING",
			"GO-1 package imported golang.org/x/net@v0.60.0, fixed in v0.62.0: info",
			"GO-3 module required go.etcd.io/etcd/client/pkg/v3@v3.7.0, fixed in v3.7.1: info",
		}},
		{"stdlib called with -strict-stdlib fails", stream, true, 1, []string{"GO-2 called stdlib@v1.26.8, fixed in v1.26.9: FAIL (raise go.mod's toolchain line"}},
		{"a called dependency fails", `{"finding":{"osv":"GO-4","trace":[{"module":"example.com/m","version":"v1.0.0","package":"example.com/m","function":"F"}]}}`, false, 1,
			[]string{"GO-4 called example.com/m@v1.0.0, fixed in no fixed version yet: FAIL (upgrade the module in go.mod)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vulns, err := collect(strings.NewReader(tc.input))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if got := report(&out, vulns, tc.strict); got != tc.wantFailing {
				t.Errorf("failing = %d, want %d\n%s", got, tc.wantFailing, out.String())
			}
			for _, l := range tc.wantLines {
				if !strings.Contains(out.String(), l) {
					t.Errorf("output lacks %q:\n%s", l, out.String())
				}
			}
		})
	}
}

func TestCollectRejectsGarbage(t *testing.T) {
	if _, err := collect(strings.NewReader("{not json")); err == nil {
		t.Error("collect accepted garbage")
	}
}

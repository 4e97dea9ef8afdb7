// Command vulnreport reads govulncheck's JSON stream (-format json) on
// standard input, prints one line per known vulnerability found, and
// exits 1 when this module's code calls a vulnerable function of a
// dependency: an upgrade in go.mod fixes those. Vulnerabilities in the Go
// standard library fail with -strict-stdlib (the Makefile's default) and are
// warnings without it: their fix is a newer Go toolchain, which go.mod's
// toolchain line selects when GOTOOLCHAIN=auto (the Makefile exports it);
// release images build with the newest patch release of that Go line
// (Dockerfile BUILD_IMAGE).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// finding is the part of govulncheck's "finding" message read here.
type finding struct {
	OSV          string `json:"osv"`
	FixedVersion string `json:"fixed_version"`
	Trace        []struct {
		Module   string `json:"module"`
		Version  string `json:"version"`
		Package  string `json:"package"`
		Function string `json:"function"`
	} `json:"trace"`
}

// message is one value of the stream; only findings matter here.
type message struct {
	Finding *finding `json:"finding"`
}

// level is how close this module's code comes to a vulnerability.
type level int

const (
	required level = iota // a required module is affected
	imported              // an imported package is affected
	called                // a vulnerable function is reachable
)

func (l level) String() string {
	return [...]string{"module required", "package imported", "called"}[l]
}

// vuln is one vulnerability at the closest level any finding showed.
type vuln struct {
	id, module, version, fixed string
	level                      level
}

// collect reads the stream and keeps, per vulnerability, its closest level.
func collect(r io.Reader) (map[string]*vuln, error) {
	out := map[string]*vuln{}
	dec := json.NewDecoder(r)
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading govulncheck's JSON output: %w", err)
		}
		f := m.Finding
		if f == nil || len(f.Trace) == 0 {
			continue
		}
		top := f.Trace[0]
		l := required
		switch {
		case top.Function != "":
			l = called
		case top.Package != "":
			l = imported
		}
		v, ok := out[f.OSV]
		if !ok {
			v = &vuln{id: f.OSV, module: top.Module, version: top.Version, fixed: f.FixedVersion, level: l}
			out[f.OSV] = v
		}
		v.level = max(v.level, l)
	}
}

// report prints the vulnerabilities and returns how many fail the check.
func report(w io.Writer, vulns map[string]*vuln, strictStdlib bool) int {
	list := make([]*vuln, 0, len(vulns))
	for _, v := range vulns {
		list = append(list, v)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].level != list[j].level {
			return list[i].level > list[j].level
		}
		return list[i].id < list[j].id
	})
	failing := 0
	for _, v := range list {
		fixed := v.fixed
		if fixed == "" {
			fixed = "no fixed version yet"
		}
		verdict := "info"
		switch {
		case v.level == called && v.module == "stdlib":
			verdict = "WARNING (fixed by a newer Go toolchain)"
			if strictStdlib {
				verdict, failing = "FAIL (raise go.mod's toolchain line to a Go with the fix; build with GOTOOLCHAIN=auto)", failing+1
			}
		case v.level == called:
			verdict, failing = "FAIL (upgrade the module in go.mod)", failing+1
		}
		fmt.Fprintf(w, "vulncheck: %s %s %s@%s, fixed in %s: %s\n", v.id, v.level, v.module, v.version, fixed, verdict)
	}
	return failing
}

func main() {
	strict := flag.Bool("strict-stdlib", false, "fail on standard library vulnerabilities too")
	flag.Parse()
	vulns, err := collect(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulnreport:", err)
		os.Exit(2)
	}
	failing := report(os.Stdout, vulns, *strict)
	var stdlib []string
	for _, v := range vulns {
		if v.module == "stdlib" && v.level == called {
			stdlib = append(stdlib, v.id)
		}
	}
	fmt.Printf("vulncheck: %d known vulnerabilities reach this module's code or modules; %d called in the standard library, %d failing\n", len(vulns), len(stdlib), failing)
	if len(stdlib) > 0 && !*strict {
		fmt.Println("vulncheck: the standard library findings need a newer Go than " + strings.TrimSpace(goVersion(vulns)) + ": build with GOTOOLCHAIN=auto (go.mod's toolchain line) or a newer local Go; images built with the Dockerfile take the newest patch release of the Go line")
	}
	if failing > 0 {
		os.Exit(1)
	}
}

// goVersion is the standard library version the findings name.
func goVersion(vulns map[string]*vuln) string {
	for _, v := range vulns {
		if v.module == "stdlib" {
			return v.version
		}
	}
	return ""
}

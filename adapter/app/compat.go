package app

import (
	"fmt"

	"github.com/spf13/pflag"
)

// refusedFlags are the flags of prometheus-adapter v0.12's adapter command
// that have no meaning in Tidal. They are accepted by the parser, so that
// the start fails with what to do instead of "unknown flag", and hidden
// from --help. Every other flag of that command works in `tidal adapter`
// with the same meaning (TestPrometheusAdapterFlags holds the list).
var refusedFlags = []struct {
	name, typ, instead string
}{{
	name: "discovery-interval", typ: "duration",
	instead: "Tidal rereads API discovery when a request names a resource it does not know, so there is no interval to set: remove the flag",
}}

// refusedFlag records that a refused flag was given.
type refusedFlag struct {
	name, typ, instead string
	set                bool
	value              string
}

func (f *refusedFlag) String() string { return f.value }
func (f *refusedFlag) Type() string   { return f.typ }
func (f *refusedFlag) Set(v string) error {
	f.set, f.value = true, v
	return nil
}

func (f *refusedFlag) err() error {
	return fmt.Errorf("--%s (a prometheus-adapter flag) is not supported by tidal adapter: %s", f.name, f.instead)
}

// addRefusedFlags adds the refused flags to fs, hidden.
func addRefusedFlags(fs *pflag.FlagSet) []*refusedFlag {
	var out []*refusedFlag
	for _, r := range refusedFlags {
		f := &refusedFlag{name: r.name, typ: r.typ, instead: r.instead}
		fs.Var(f, r.name, "prometheus-adapter flag, refused: "+r.instead)
		if r.typ == "bool" {
			fs.Lookup(r.name).NoOptDefVal = "true"
		}
		_ = fs.MarkHidden(r.name)
		out = append(out, f)
	}
	return out
}

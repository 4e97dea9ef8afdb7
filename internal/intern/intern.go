// Package intern shares the strings a decoder meets more than once, so
// that a response repeating a name holds it once.
//
// A map per decode rather than the standard library's unique package:
// what one response repeats is dropped with it, no process-wide table
// keeps it, and a lookup of bytes already seen allocates nothing.
package intern

// Strings holds one copy of each string seen; the zero value is not
// usable, make one with Strings{}.
type Strings map[string]string

// Of returns the string b spells, shared with every earlier call for the
// same bytes. b is not kept.
func (s Strings) Of(b []byte) string {
	if v, ok := s[string(b)]; ok {
		return v
	}
	v := string(b)
	s[v] = v
	return v
}

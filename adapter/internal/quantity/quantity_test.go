package quantity

import (
	"errors"
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestFromFloat(t *testing.T) {
	tests := []struct {
		name string
		in   float64
		want string // "" for ErrNotANumber
	}{
		{"sixteenths keep their precision (not 313m)", 0.3125, "312500u"},
		{"float just below 1.001 rounds to it", 1.001, "1001m"},
		{"half a nano-unit rounds away from zero", 1.0000000005, "1000000001n"},
		{"below half a nano-unit is zero", 1e-10, "0"},
		{"one nano-unit", 1e-9, "1n"},
		{"negative", -0.5, "-500m"},
		{"negative half rounds away from zero", -2.5e-9, "-3n"},
		{"integer", 3, "3"},
		{"pi keeps nine digits", 3.14159265358979, "3141592654n"},
		{"largest nano mantissa", 9.2e9, "9200M"},
		{"too large for nano: micro scale", 1e12, "1T"},
		{"too large for nano, with a fraction", 12345678901.5, "12345678901500m"},
		{"too large for int64 units: kilo scale", 1e20, "100E"},
		{"near 2^63 units", 9.2e18, "9200P"},
		{"just below 2^63 units", 9.223372036854775e18, "9223372036854775k"},
		{"more than 2^63 nano-units, digits to micro", -9223372036.854774, "-9223372036854774u"},
		{"just below the largest SI suffix's reach", 999999999999999900000, "999999999999999900k"},
		{"10^21 needs an exponent (DecimalSI would write 1)", 1e21, "1e21"},
		{"an exponent past exa", 9e36, "9e36"},
		{"MaxFloat64 does not overflow", math.MaxFloat64, "179769313486231570e291"},
		{"-MaxFloat64", -math.MaxFloat64, "-179769313486231570e291"},
		{"smallest float is zero", math.SmallestNonzeroFloat64, "0"},
		{"seventeen digits below nano are rounded", 0.12345678912345678, "123456789n"},
		{"negative rounding below half", -1.0000000004, "-1"},
		{"negative rounding at half", -1.0000000005, "-1000000001n"},
		{"seventeen digits above 2^63 nano-units", 12345678901234568, "12345678901234568"},
		{"NaN", math.NaN(), ""},
		{"+Inf", math.Inf(1), ""},
		{"-Inf", math.Inf(-1), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := FromFloat(tt.in)
			if tt.want == "" {
				if !errors.Is(err, ErrNotANumber) {
					t.Fatalf("FromFloat(%g) = %s, %v; want an ErrNotANumber", tt.in, q.String(), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("FromFloat(%g): %v", tt.in, err)
			}
			if got := q.String(); got != tt.want {
				t.Errorf("FromFloat(%g) = %s, want %s", tt.in, got, tt.want)
			}
			// What is served parses back to the same quantity.
			back, err := resource.ParseQuantity(q.String())
			if err != nil || back.Cmp(q) != 0 {
				t.Errorf("%s parses back as %s (%v)", q.String(), back.String(), err)
			}
			// And reads as the value, to the float's precision (and half a
			// nano-unit).
			if got := q.AsApproximateFloat64(); math.Abs(got-tt.in) > math.Abs(tt.in)*1e-15+0.5e-9 {
				t.Errorf("%s reads as %g, want %g", q.String(), got, tt.in)
			}
		})
	}
}

// Package quantity turns Prometheus sample values into resource.Quantity
// values for every metrics API the adapter serves (custom, external and
// metrics.k8s.io), with one rule: the value's decimal digits, rounded to
// nano-units, at whatever scale keeps them.
package quantity

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// ErrNotANumber marks a value that cannot be served as a number: NaN or
// ±Inf.
var ErrNotANumber = errors.New("not a finite number")

// siLimit is where DecimalSI stops being able to write every value: its
// largest suffix is E (10^18), and a quantity whose canonical form needs
// 10^21 or more is written without its exponent ("1000E" becomes "1").
const siLimit = 1e21

// FromFloat converts v to a resource.Quantity holding the decimal digits
// Prometheus writes for it (the shortest that read back as v, at most 17),
// rounded to nano-units, half away from zero: 0.3125 -> 312500u (not
// 313m), 1.001 -> 1001m, 1.0000000005 -> 1000000001n, 1e-10 -> 0. The
// mantissa is an int64 at the scale of the digits (1e12 -> 1T, 1e20 ->
// 100E), so nothing overflows however large v is. Below 10^21 in magnitude
// the quantity is DecimalSI, as every metrics API writes its values; from
// 10^21 up to MaxFloat64 it is DecimalExponent ("1e21",
// "179769313486231570e291"), the only format that writes such values
// correctly. What is served parses back to the same quantity.
//
// NaN and ±Inf are an error wrapping ErrNotANumber.
func FromFloat(v float64) (resource.Quantity, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return resource.Quantity{}, fmt.Errorf("the value is %v, %w", v, ErrNotANumber)
	}
	mantissa, scale := decimal(v)
	if scale < resource.Nano {
		mantissa, scale = roundTo(mantissa, int(resource.Nano-scale)), resource.Nano
	}
	q := resource.NewScaledQuantity(mantissa, scale)
	if math.Abs(v) >= siLimit {
		q.Format = resource.DecimalExponent
	}
	return *q, nil
}

// decimal returns the shortest decimal form of the finite v as mantissa *
// 10^scale (at most 17 digits, so the mantissa fits an int64).
func decimal(v float64) (int64, resource.Scale) {
	s := strconv.FormatFloat(v, 'e', -1, 64) // "-1.2345e+06"
	digits, exp, _ := strings.Cut(s, "e")
	e, _ := strconv.Atoi(exp)
	frac := 0
	if i := strings.IndexByte(digits, '.'); i >= 0 {
		frac = len(digits) - i - 1
		digits = digits[:i] + digits[i+1:]
	}
	m, _ := strconv.ParseInt(digits, 10, 64)
	return m, resource.Scale(e - frac)
}

// roundTo drops the last n decimal digits of m, rounding half away from
// zero.
func roundTo(m int64, n int) int64 {
	if n > 18 {
		return 0 // |m| < 10^17 is below half of 10^n
	}
	p := int64(math.Pow10(n))
	q, r := m/p, m%p
	switch {
	case r >= 0 && 2*r >= p:
		q++
	case r < 0 && -2*r >= p:
		q--
	}
	return q
}

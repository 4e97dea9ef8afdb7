package replicas

import "errors"

// Error texts produced by the calculator itself, identical to upstream's.
var (
	errNoPods             = errors.New("no pods returned by selector while calculating replica count")
	errNoUsableMetrics    = errors.New("did not receive metrics for targeted pods (pods might be unready)")
	errNoMatchedKnownPods = errors.New("no metrics returned matched known pods")
)

// ErrNoPods reports an empty pod list ("no pods returned by selector while
// calculating replica count").
func ErrNoPods() error { return errNoPods }

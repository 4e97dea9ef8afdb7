package source

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
)

// The waits client-go logs: longer than longThrottle at level 3, longer
// than extraLongThrottle also at level 0, at most every
// extraLongThrottleEvery.
const (
	longThrottle           = 50 * time.Millisecond
	extraLongThrottle      = time.Second
	extraLongThrottleEvery = 10 * time.Second
	throttleReason         = "client-side throttling, not priority and fairness"
)

// throttle takes a status write's token from the client rate limiter as
// client-go's request does before it sends (the wait, its logs and the
// rest_client_rate_limiter_duration_seconds sample), with the metric's URL
// template made once: client-go builds it anew for every request (about
// 2% of native mode's CPU at 1,000 autoscalers) though its metric keeps
// only the host. The status client itself has no limiter, so the token is
// not taken twice; a retry client-go makes after a Retry-After answer,
// which waits as the server asked, takes none.
type throttle struct {
	limiter flowcontrol.RateLimiter
	// template is the URL the metric gets, as client-go's template of
	// the write's URL would be.
	template url.URL
	// lastLoud is when a wait longer than extraLongThrottle was last
	// logged at level 0 (Unix nanoseconds).
	lastLoud *atomic.Int64
}

func newThrottle(limiter flowcontrol.RateLimiter, template url.URL) throttle {
	return throttle{limiter: limiter, template: template, lastLoud: new(atomic.Int64)}
}

// wait waits for a token (none when there is no limiter).
func (t throttle) wait(ctx context.Context) error {
	if t.limiter == nil {
		return nil
	}
	start := time.Now()
	err := t.limiter.Wait(ctx)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("client rate limiter Wait returned an error: %w", err)
	}
	latency := time.Since(start)
	if latency > longThrottle {
		logger := klog.FromContext(ctx)
		logger.V(3).Info("Waited before sending request", "delay", latency, "reason", throttleReason, "verb", "PUT", "URL", t.template.String())
		if latency > extraLongThrottle && t.loud(start) {
			logger.Info("Waited before sending request", "delay", latency, "reason", throttleReason, "verb", "PUT", "URL", t.template.String())
		}
	}
	metrics.RateLimiterLatency.Observe(ctx, "PUT", t.template, latency)
	return err
}

// loud reports whether a long wait at now may be logged at level 0: the
// first in extraLongThrottleEvery.
func (t throttle) loud(now time.Time) bool {
	last := t.lastLoud.Load()
	return now.UnixNano()-last >= int64(extraLongThrottleEvery) && t.lastLoud.CompareAndSwap(last, now.UnixNano())
}

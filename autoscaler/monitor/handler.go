package monitor

import (
	"compress/gzip"
	"io"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// Handler serves /metrics: g's metrics, then objects' series, as one text
// exposition (version 0.0.4), gzipped when the client accepts it. The
// per-object series are most of the page and are written as rendered
// (ObjectSeries); g's go through client_golang's encoder.
func Handler(g prometheus.Gatherer, objects *ObjectSeries) http.Handler {
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mfs, err := g.Gather()
		if err != nil {
			http.Error(w, "An error has occurred while gathering the metrics:\n\n"+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", string(format))
		var out io.Writer = w
		if acceptsGzip(r) {
			w.Header().Set("Content-Encoding", "gzip")
			gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level
			defer func() { _ = gz.Close() }()
			out = gz
		}
		enc := expfmt.NewEncoder(out, format)
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				return // the client went away
			}
		}
		if objects != nil {
			_ = objects.WriteText(out)
		}
	})
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if enc, _, _ := strings.Cut(strings.TrimSpace(part), ";"); strings.EqualFold(enc, "gzip") {
			return true
		}
	}
	return false
}

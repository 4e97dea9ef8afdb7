package monitor

import (
	"bufio"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ObjectSeries holds the per-autoscaler tidal_autoscaler_hpa_* gauges,
// each object's as it was last observed, and renders an object's lines of
// the text exposition when it is observed. A scrape then only copies
// bytes: through client_golang's registry (building each sample, checking
// and sorting them, then encoding) a scrape of the 16 or so series of
// each of 1,000 autoscalers cost the controller 0.09 to 0.13 CPU-s here,
// 22 times what a scrape of the rendered lines costs (BenchmarkScrape).
// kube-state-metrics serves its per-object series the same way, for the
// same reason.
//
// It is a prometheus.Collector too, for registries and tests; Handler
// serves it beside a registry's other metrics.
type ObjectSeries struct {
	descs [numFamilies]*prometheus.Desc
	// headers are each family's HELP and TYPE lines.
	headers [numFamilies]string

	mu      sync.RWMutex
	objects map[objectKey]*objectEntry
}

type objectKey struct{ namespace, name string }

// objectEntry is one object's series: the samples, and the text lines of
// each family. Both are replaced, never changed, so a scrape may hold
// them after the lock is released.
type objectEntry struct {
	samples []objectSample
	text    [numFamilies][]byte
}

type objectSample struct {
	family int
	// extra are the values of the family's extra labels (two at most),
	// held in the sample: a slice each was a fifth of a reconcile's
	// allocations here.
	extra [2]string
	value float64
}

// NewObjectSeries returns an empty set; New registers one with its
// Registerer unless it is given one (which its caller then serves).
func NewObjectSeries() *ObjectSeries {
	s := &ObjectSeries{objects: map[objectKey]*objectEntry{}}
	for fam, f := range objectFamilies {
		s.descs[fam] = prometheus.NewDesc(f.name, f.help, append([]string{"namespace", "hpa_name"}, f.extra...), nil)
		s.headers[fam] = "# HELP " + f.name + " " + escapeHelp(f.help) + "\n# TYPE " + f.name + " gauge\n"
	}
	return s
}

// set replaces an object's series. The lines of the families whose
// samples changed are rendered into one buffer sized for them; those of
// the others are the previous entry's (moving usage changes only the
// status values, and rendering every line each reconcile was 6% of the
// controller's allocations at 1,000 autoscalers).
func (s *ObjectSeries) set(namespace, name string, samples []objectSample) {
	key := objectKey{namespace, name}
	s.mu.RLock()
	prev := s.objects[key]
	s.mu.RUnlock()
	e := &objectEntry{samples: samples}
	var changed [numFamilies]bool
	size := 0
	for fam := range numFamilies {
		if prev != nil && sameFamily(prev.samples, samples, fam) {
			e.text[fam] = prev.text[fam]
			continue
		}
		changed[fam] = true
		for _, x := range samples {
			if x.family == fam {
				size += lineSize(fam, namespace, name, x.extra[:])
			}
		}
	}
	buf := make([]byte, 0, size)
	for fam := range numFamilies {
		if !changed[fam] {
			continue
		}
		start := len(buf)
		for _, x := range samples {
			if x.family == fam {
				buf = appendLine(buf, fam, namespace, name, x.extra[:], x.value)
			}
		}
		if len(buf) > start {
			e.text[fam] = buf[start:len(buf):len(buf)]
		}
	}
	s.mu.Lock()
	s.objects[key] = e
	s.mu.Unlock()
}

// sameFamily reports whether a and b hold the same samples of fam, in
// the same order.
func sameFamily(a, b []objectSample, fam int) bool {
	i, j := 0, 0
	for {
		for i < len(a) && a[i].family != fam {
			i++
		}
		for j < len(b) && b[j].family != fam {
			j++
		}
		if i == len(a) || j == len(b) {
			return i == len(a) && j == len(b)
		}
		if a[i].extra != b[j].extra || a[i].value != b[j].value {
			return false
		}
		i++
		j++
	}
}

// forget drops an object's series.
func (s *ObjectSeries) forget(namespace, name string) {
	s.mu.Lock()
	delete(s.objects, objectKey{namespace, name})
	s.mu.Unlock()
}

// sorted returns the entries by namespace and name.
func (s *ObjectSeries) sorted() []*objectEntry {
	s.mu.RLock()
	keys := make([]objectKey, 0, len(s.objects))
	for k := range s.objects {
		keys = append(keys, k)
	}
	entries := make([]*objectEntry, len(keys))
	slices.SortFunc(keys, func(a, b objectKey) int {
		if c := strings.Compare(a.namespace, b.namespace); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	for i, k := range keys {
		entries[i] = s.objects[k]
	}
	s.mu.RUnlock()
	return entries
}

// Describe implements prometheus.Collector.
func (s *ObjectSeries) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range s.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *ObjectSeries) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, e := range s.objects {
		for _, x := range e.samples {
			ch <- prometheus.MustNewConstMetric(s.descs[x.family], prometheus.GaugeValue, x.value,
				append([]string{k.namespace, k.name}, x.extra[:len(objectFamilies[x.family].extra)]...)...)
		}
	}
}

// WriteText writes every family that has a series in the text exposition
// format (version 0.0.4): its HELP and TYPE lines, then its series, by
// object.
func (s *ObjectSeries) WriteText(w io.Writer) error {
	entries := s.sorted()
	bw := bufio.NewWriterSize(w, 64<<10)
	for fam := range objectFamilies {
		header := false
		for _, e := range entries {
			if len(e.text[fam]) == 0 {
				continue
			}
			if !header {
				header = true
				_, _ = bw.WriteString(s.headers[fam])
			}
			_, _ = bw.Write(e.text[fam])
		}
	}
	return bw.Flush()
}

// appendLine appends one sample's line: name{namespace="",hpa_name="",...} value.
func appendLine(b []byte, fam int, namespace, name string, extra []string, v float64) []byte {
	b = append(b, objectFamilies[fam].name...)
	b = append(b, `{namespace="`...)
	b = appendLabelValue(b, namespace)
	b = append(b, `",hpa_name="`...)
	b = appendLabelValue(b, name)
	b = append(b, '"')
	for i, l := range objectFamilies[fam].extra {
		b = append(b, ',')
		b = append(b, l...)
		b = append(b, `="`...)
		b = appendLabelValue(b, extra[i])
		b = append(b, '"')
	}
	b = append(b, "} "...)
	b = appendValue(b, v)
	return append(b, '\n')
}

// lineSize is about the length of appendLine's line: exact for label
// values that need no escaping and a value of up to 24 characters.
func lineSize(fam int, namespace, name string, extra []string) int {
	n := len(objectFamilies[fam].name) + len(`{namespace="",hpa_name=""} `) + len(namespace) + len(name) + 24 + 1
	for i, l := range objectFamilies[fam].extra {
		n += len(`,=""`) + len(l) + len(extra[i])
	}
	return n
}

// appendLabelValue escapes as the text format asks: backslash, double
// quote and line feed.
func appendLabelValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// escapeHelp escapes a HELP text: backslash and line feed.
func escapeHelp(h string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(h)
}

// appendValue writes a value as expfmt does.
func appendValue(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

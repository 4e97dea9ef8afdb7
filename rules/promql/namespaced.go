package promql

// Namespaced reports whether requests get the namespace matcher: always
// for custom-metrics and resource queries, and for external ones unless
// the rule says resources.namespaced: false.
func (q *Query) Namespaced() bool { return q.namespaced }

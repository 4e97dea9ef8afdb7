package objects

import (
	"strconv"
	"testing"
)

// TestSelectMemoBounded: selectors come from requests, so the remembered
// answers stay within maxEntries and maxItems whatever is asked.
func TestSelectMemoBounded(t *testing.T) {
	tests := []struct {
		name    string
		answers int
		items   int // per answer
	}{
		{"many small answers", maxEntries * 2, 1},
		{"few large answers", 16, maxItems / 4},
		{"one answer over the item bound", 1, maxItems + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newSelectMemo()
			for i := range tt.answers {
				got, err := m.getNames("ns", "app="+strconv.Itoa(i), func() ([]string, error) {
					return make([]string, tt.items), nil
				})
				if err != nil || len(got) != tt.items {
					t.Fatalf("answer %d: %d names, %v", i, len(got), err)
				}
				if len(m.names.entries) > maxEntries || m.names.items > maxItems {
					t.Fatalf("after %d answers: %d entries holding %d items", i+1, len(m.names.entries), m.names.items)
				}
			}
			sum := 0
			for _, e := range m.names.entries {
				sum += len(e.v)
			}
			if sum != m.names.items {
				t.Errorf("items counted %d, held %d", m.names.items, sum)
			}
		})
	}
}

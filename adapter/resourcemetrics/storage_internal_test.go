package resourcemetrics

import (
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// A list without a fieldSelector arrives with an empty, non-nil field
// selector; selectors drops it so that List does not test it on every pod.
func TestSelectors(t *testing.T) {
	tests := []struct {
		title      string
		options    *metainternalversion.ListOptions
		wantLabels string
		wantFields string // "" for no field selector (nil)
	}{
		{title: "no options", options: nil},
		{title: "nothing set", options: &metainternalversion.ListOptions{}},
		{title: "empty field selector, as the apiserver decodes a missing one",
			options: &metainternalversion.ListOptions{FieldSelector: fields.Everything()}},
		{title: "field selector parsed from an empty string",
			options: &metainternalversion.ListOptions{FieldSelector: mustParseFields(t, "")}},
		{title: "field selector kept",
			options:    &metainternalversion.ListOptions{FieldSelector: mustParseFields(t, "metadata.name=a")},
			wantFields: "metadata.name=a"},
		{title: "label selector kept",
			options:    &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"app": "web"}), FieldSelector: fields.Everything()},
			wantLabels: "app=web"},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			sel, fieldSel := selectors(tt.options)
			if sel == nil || sel.String() != tt.wantLabels {
				t.Errorf("label selector %v, want %q", sel, tt.wantLabels)
			}
			switch {
			case tt.wantFields == "" && fieldSel != nil:
				t.Errorf("field selector %q, want none", fieldSel.String())
			case tt.wantFields != "" && (fieldSel == nil || fieldSel.String() != tt.wantFields):
				t.Errorf("field selector %v, want %q", fieldSel, tt.wantFields)
			}
		})
	}
}

func mustParseFields(t *testing.T, s string) fields.Selector {
	t.Helper()
	sel, err := fields.ParseSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

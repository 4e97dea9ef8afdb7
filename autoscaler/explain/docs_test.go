package explain

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// TestDocSample checks that docs/crd.md's `tidal explain` sample is what
// explain prints for the reconciled object the document shows, and that
// both are this package's fixture.
func TestDocSample(t *testing.T) {
	raw, err := os.ReadFile("../../docs/crd.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	// The reconciled object is the yaml block with a decision.
	var object string
	for _, block := range fenced(doc, "```yaml") {
		if strings.Contains(block, "decision:") {
			object = block
		}
	}
	_, after, ok := strings.Cut(doc, "### tidal explain")
	samples := fenced(after, "```")
	if object == "" || !ok || len(samples) == 0 {
		t.Fatal("docs/crd.md has no reconciled object or no ### tidal explain sample")
	}
	ha := &v1alpha1.HorizontalAutoscaler{}
	if err := yaml.UnmarshalStrict([]byte(object), ha); err != nil {
		t.Fatal(err)
	}
	r, err := OfHorizontalAutoscaler(ha)
	if err != nil {
		t.Fatal(err)
	}
	if got := Text(r); got != samples[0] {
		t.Errorf("explain prints:\n%s\ndocs/crd.md shows:\n%s", got, samples[0])
	}
	if samples[0] != webText {
		t.Errorf("docs/crd.md's sample is not the fixture's:\n%s", samples[0])
	}
}

// fenced returns the contents of the blocks of s opened by a line that is
// exactly open and closed by a line "```".
func fenced(s, open string) []string {
	var blocks []string
	var cur *strings.Builder
	for _, line := range strings.Split(s, "\n") {
		switch {
		case cur == nil && line == open:
			cur = &strings.Builder{}
		case cur != nil && line == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return blocks
}

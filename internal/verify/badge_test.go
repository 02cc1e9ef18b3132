package verify_test

import (
	"bytes"
	"encoding/xml"
	"strconv"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/verify"
)

// badgeDoc is what a badge says, read back as SVG: its accessible label, its title and the fill
// of its value.
type badgeDoc struct {
	XMLName xml.Name `xml:"svg"`
	Label   string   `xml:"aria-label,attr"`
	Title   string   `xml:"title"`
	Rects   []struct {
		Fill string `xml:"fill,attr"`
	} `xml:"rect"`
	Texts []string `xml:"g>text"`
}

func readBadge(t *testing.T, rep *verify.Report) badgeDoc {
	t.Helper()
	var b bytes.Buffer
	if err := rep.WriteBadge(&b); err != nil {
		t.Fatalf("WriteBadge: %v", err)
	}
	var d badgeDoc
	if err := xml.Unmarshal(b.Bytes(), &d); err != nil {
		t.Fatalf("the badge is not well-formed SVG: %v\n%s", err, b.String())
	}
	return d
}

// TestBadge: the badge of a real run says "latch verify: N/N" in green; the badge of a run with
// a failing guarantee (an injected fault) says how many passed of those applicable, in red.
func TestBadge(t *testing.T) {
	t.Parallel()
	pass := run(t, &verify.Config{Policy: parse(t, effectsPolicy), Only: []string{"G1", "G3"}})
	d := readBadge(t, pass)
	if pass.Failed != 0 || pass.Applicable != 2 {
		t.Fatalf("the passing run: %d of %d applicable failed", pass.Failed, pass.Applicable)
	}
	if d.Label != "latch verify: 2/2" || d.Title != "latch verify: 2/2" || strings.Join(d.Texts, " ") != "latch verify 2/2" {
		t.Errorf("passing badge says %q / %q / %q, want latch verify: 2/2", d.Label, d.Title, d.Texts)
	}
	if len(d.Rects) < 2 || d.Rects[1].Fill != "#2e7d32" {
		t.Errorf("passing badge value fill = %+v, want green #2e7d32", d.Rects)
	}

	fail := run(t, verify.WithFaults(&verify.Config{Policy: parse(t, effectsPolicy), Only: []string{"G1", "G3"}}, verify.FaultReserveLies))
	if fail.Failed == 0 {
		t.Fatalf("the run with %s failed nothing", verify.FaultReserveLies)
	}
	d = readBadge(t, fail)
	want := "latch verify: " + strconv.Itoa(fail.Passed) + "/2"
	if d.Label != want {
		t.Errorf("failing badge says %q, want %q", d.Label, want)
	}
	if len(d.Rects) < 2 || d.Rects[1].Fill != "#c62828" {
		t.Errorf("failing badge value fill = %+v, want red #c62828", d.Rects)
	}

	none := readBadge(t, &verify.Report{})
	if none.Label != "latch verify: 0/0" || none.Rects[1].Fill == "#2e7d32" {
		t.Errorf("a badge with nothing applicable = %q %+v, want 0/0 and not green", none.Label, none.Rects)
	}
}

package verify

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// Badge colours: every applicable guarantee passed, at least one failed, nothing applicable.
const (
	badgePass = "#2e7d32"
	badgeFail = "#c62828"
	badgeNone = "#757575"
)

// BadgeText is what the badge of r says: "latch verify" and the guarantees that pass of those
// applicable, "N/M".
func (r *Report) BadgeText() (label, value string) {
	return "latch verify", fmt.Sprintf("%d/%d", r.Passed, r.Applicable)
}

// badgeColor is the colour of the badge's value: red when any guarantee failed.
func (r *Report) badgeColor() string {
	switch {
	case r.Failed > 0:
		return badgeFail
	case r.Applicable == 0:
		return badgeNone
	}
	return badgePass
}

// WriteBadge writes the report as a small SVG badge, "latch verify: N/M" — green when every
// applicable guarantee passed, red when any failed, grey when none was applicable — for a
// README or a CI summary. Its text is escaped as XML.
func (r *Report) WriteBadge(w io.Writer) error {
	label, value := r.BadgeText()
	// Widths are estimated at 7 pixels a character (the badge's 11px sans-serif), plus padding.
	lw, vw := 7*len(label)+12, 7*len(value)+12
	total := lw + vw
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="20" role="img" aria-label="%s: %s">`+"\n", total, esc(label), esc(value))
	fmt.Fprintf(&b, `<title>%s: %s</title>`+"\n", esc(label), esc(value))
	fmt.Fprintf(&b, `<rect width="%d" height="20" rx="3" fill="#555"/>`+"\n", total)
	fmt.Fprintf(&b, `<rect x="%d" width="%d" height="20" rx="3" fill="%s"/>`+"\n", lw, vw, r.badgeColor())
	fmt.Fprintf(&b, `<rect x="%d" width="4" height="20" fill="%s"/>`+"\n", lw, r.badgeColor())
	b.WriteString(`<g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">` + "\n")
	fmt.Fprintf(&b, `<text x="%d" y="14">%s</text>`+"\n", lw/2, esc(label))
	fmt.Fprintf(&b, `<text x="%d" y="14">%s</text>`+"\n", lw+vw/2, esc(value))
	b.WriteString("</g>\n</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// esc is s escaped for XML text and attribute values.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

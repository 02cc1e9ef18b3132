package cli

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/latchkit/latch/policy"
)

// TestStarterTemplatesEmbedded: the list of templates and the embedded files are the same set,
// at least the six sectors, and each file parses with no warning (--strict's bar; the script
// init_templates.txtar runs check --strict and verify on each through the real command).
func TestStarterTemplatesEmbedded(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(templateFS, "templates/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var embedded []string
	for _, f := range files {
		embedded = append(embedded, strings.TrimSuffix(strings.TrimPrefix(f, "templates/"), ".yaml"))
	}
	listed := templateNames()
	if !slices.Equal(slices.Sorted(slices.Values(listed)), embedded) {
		t.Errorf("templates listed %v, embedded %v", listed, embedded)
	}
	for _, want := range []string{"payments", "devops", "support", "data", "healthcare-records", "email-outreach"} {
		if !slices.Contains(listed, want) {
			t.Errorf("no %s template", want)
		}
	}
	if slices.Contains(listed, templateListName) {
		t.Errorf("a template is named %q, the word that lists them", templateListName)
	}
	for _, name := range listed {
		doc, err := starterTemplate(name)
		if err != nil {
			t.Fatalf("starterTemplate(%q): %v", name, err)
		}
		p, err := policy.Parse(name+".yaml", doc)
		if err != nil {
			t.Errorf("template %s: %v", name, err)
			continue
		}
		for _, w := range p.Warnings() {
			t.Errorf("template %s: %d:%d: %s [%s]", name, w.Pos.Line, w.Pos.Column, w.Msg, w.Code)
		}
	}
}

package cli

import (
	"embed"
	"fmt"
	"io"
	"slices"
	"strings"
)

// templateFS holds the sector starter policies `latch init --template NAME` writes. Each passes
// `latch check --strict` and `latch verify` (templates_test.go holds them to it).
//
//go:embed templates/*.yaml
var templateFS embed.FS

// starterTemplates are the sector starters, in the order `latch init --template list` shows
// them, with what each covers.
var starterTemplates = []struct{ name, about string }{
	{"payments", "charges, refunds an approver may lower, two-person payouts, a daily budget, redacted bank details"},
	{"devops", "merges, deploys, rollbacks, migrations and scaling; production waits for on-call; bots act through grants"},
	{"support", "refunds and goodwill credits, replies sent once, account closure by an authenticated lead"},
	{"data", "exports, backfills, row deletions and table drops; personal data and destructive jobs wait for data owners"},
	{"healthcare-records", "appointments, record amendments and disclosures approved by authenticated clinicians; identifiers redacted"},
	{"email-outreach", "one message per recipient per campaign, consent rules, a daily sending budget, large launches approved"},
}

// templateListName is the --template value that lists the templates instead of writing one.
const templateListName = "list"

// starterTemplate returns the policy of the named template, or a usage error listing them.
func starterTemplate(name string) ([]byte, error) {
	if !slices.ContainsFunc(starterTemplates, func(t struct{ name, about string }) bool { return t.name == name }) {
		return nil, usagef("unknown template %q (expected one of %s; latch init --template list describes them)", name, strings.Join(templateNames(), ", "))
	}
	return templateFS.ReadFile("templates/" + name + ".yaml")
}

func templateNames() []string {
	names := make([]string, len(starterTemplates))
	for i, t := range starterTemplates {
		names[i] = t.name
	}
	return names
}

// writeTemplateList prints each template's name and what it covers.
func writeTemplateList(w io.Writer) {
	for _, t := range starterTemplates {
		fmt.Fprintf(w, "%-20s %s\n", t.name, t.about)
	}
}

package latch_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
)

// userFacingFiles returns the files a user of the module reads: the Markdown at the root and
// under docs/, every non-test Go file (godoc and error messages) and the embedded SQL migrations.
// Test files and testdata are the project's own.
func userFacingFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(name, "_test.go"):
		case strings.HasSuffix(name, ".go"), strings.HasSuffix(name, ".sql"):
			files = append(files, path)
		case strings.HasSuffix(name, ".md") && (filepath.Dir(path) == "." || strings.HasPrefix(path, "docs"+string(filepath.Separator))):
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found %d user-facing files; the walk is not looking at the module", len(files))
	}
	return files
}

var (
	// specCitation is a citation of the project's internal specification, which users do not have.
	specCitation = regexp.MustCompile(`\bSPEC\b`)
	// section is a "§" citation; the only ones allowed cite an RFC ("RFC 8785 §3.2.3").
	section    = regexp.MustCompile(`§`)
	rfcSection = regexp.MustCompile(`RFC \d+ $`)
)

// specCitations returns "line N: text" for every citation of the internal specification in src.
func specCitations(src string) []string {
	var found []string
	for i, line := range strings.Split(src, "\n") {
		bad := specCitation.MatchString(line)
		for _, loc := range section.FindAllStringIndex(line, -1) {
			if !rfcSection.MatchString(line[:loc[0]]) {
				bad = true
			}
		}
		if bad {
			found = append(found, "line "+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
		}
	}
	return found
}

// TestNoSpecCitations holds the README, docs/, godoc and error messages to standing alone: a
// reference explains itself or links the docs/ page that does, never a "SPEC §" the user lacks.
func TestNoSpecCitations(t *testing.T) {
	t.Parallel()
	for _, f := range userFacingFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range specCitations(string(b)) {
			t.Errorf("%s %s: cites the internal specification; link the docs/ page that explains it", f, c)
		}
	}
}

func TestSpecCitationsDetector(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want bool
	}{
		{"// State is the state of an effect record (SPEC §6.1).", true},
		{"see SPEC 6.2", true},
		{"the approval rules (§5), written once", true},
		{"SPEC§4", true},
		{"// RFC 8785 §3.2.3 orders keys", false},
		{"as RFC 7515 §4.1.11 says, and §5 of nothing", true},
		{"the retry table (docs/guarantees.md#the-retry-table)", false},
		{"a SPECIAL case and a spec of a child", false},
	}
	for _, tt := range tests {
		if got := len(specCitations(tt.line)) > 0; got != tt.want {
			t.Errorf("specCitations(%q) found = %v, want %v", tt.line, got, tt.want)
		}
	}
}

var (
	// mdLink is a relative Markdown link: [text](target) with no scheme.
	mdLink = regexp.MustCompile(`\]\(([^)\s:]*)\)`)
	// docsRef is a docs/ page named in a Go or SQL comment, optionally with an anchor.
	docsRef = regexp.MustCompile(`docs/((?:[a-z0-9_-]+/)?[a-z0-9_-]+\.md)(#[a-z0-9_-]+)?`)
)

// TestDocAnchors checks that every link to a docs/ page — from the docs, the README or a Go
// comment — names a page and a heading that exist, so a renamed page or heading cannot leave
// godoc pointing nowhere.
func TestDocAnchors(t *testing.T) {
	t.Parallel()
	anchors := map[string]map[string]bool{} // clean path → anchors
	anchorsOf := func(path string) (map[string]bool, bool) {
		path = filepath.Clean(path)
		if a, ok := anchors[path]; ok {
			return a, a != nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			anchors[path] = nil
			return nil, false
		}
		anchors[path] = headingAnchors(string(b))
		return anchors[path], true
	}
	for _, f := range userFacingFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		type ref struct{ path, anchor string }
		var refs []ref
		if strings.HasSuffix(f, ".md") {
			for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
				target, anchor, _ := strings.Cut(m[1], "#")
				switch {
				case target == "":
					refs = append(refs, ref{f, anchor})
				case strings.HasSuffix(target, ".md"):
					refs = append(refs, ref{filepath.Join(filepath.Dir(f), target), anchor})
				}
			}
		} else {
			for _, m := range docsRef.FindAllStringSubmatch(string(b), -1) {
				refs = append(refs, ref{filepath.Join("docs", m[1]), strings.TrimPrefix(m[2], "#")})
			}
		}
		for _, r := range refs {
			a, ok := anchorsOf(r.path)
			if !ok {
				t.Errorf("%s links %s: no such page", f, r.path)
				continue
			}
			if r.anchor != "" && !a[r.anchor] {
				t.Errorf("%s links %s#%s: no such heading", f, r.path, r.anchor)
			}
		}
	}
}

// headingAnchors returns the anchors a Markdown renderer gives the headings of doc: lowercase,
// punctuation dropped, spaces as hyphens, "-1", "-2" … for repeats. Fenced code is skipped.
func headingAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		for i := 1; out[a]; i++ {
			a = b.String() + "-" + strconv.Itoa(i)
		}
		out[a] = true
	}
	return out
}

func TestHeadingAnchors(t *testing.T) {
	t.Parallel()
	doc := "# `latch verify`: the guarantee catalogue\n## Identity: JWTs\n```\n# not a heading\n```\n## Output\n### Output\n"
	got := headingAnchors(doc)
	for _, want := range []string{"latch-verify-the-guarantee-catalogue", "identity-jwts", "output", "output-1"} {
		if !got[want] {
			t.Errorf("headingAnchors(...) has no %q; got %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("headingAnchors(...) took a line of fenced code as a heading")
	}
}

// quickstartRegion returns the code between the quickstart markers of example_quickstart_test.go,
// one tab of indentation removed: what README's quickstart shows.
func quickstartRegion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("example_quickstart_test.go")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	const begin, end = "\t// quickstart: begin\n", "\t// quickstart: end\n"
	i, j := strings.Index(src, begin), strings.Index(src, end)
	if i < 0 || j < i {
		t.Fatalf("example_quickstart_test.go: no %q … %q region", strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(src[i+len(begin):j], "\n") {
		out.WriteString(strings.TrimPrefix(line, "\t"))
	}
	return out.String()
}

// fencedBlocks returns the fenced code blocks of section (the text under one heading), by
// language tag, in order.
func fencedBlocks(section string) map[string][]string {
	blocks := map[string][]string{}
	lines := strings.SplitAfter(section, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(strings.TrimRight(lines[i], "\n"), "```")
		if !ok {
			continue
		}
		var body strings.Builder
		for i++; i < len(lines) && strings.TrimRight(lines[i], "\n") != "```"; i++ {
			body.WriteString(lines[i])
		}
		blocks[lang] = append(blocks[lang], body.String())
	}
	return blocks
}

// readmeSection returns the text of README.md under the heading "## name", up to the next one.
func readmeSection(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	head := "\n## " + name + "\n"
	i := strings.Index(readme, head)
	if i < 0 {
		t.Fatalf("README.md has no %q section", strings.TrimSpace(head))
	}
	section := readme[i+len(head):]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j+1]
	}
	return section
}

// TestReadmeQuickstart holds README's quickstart to the code go test runs: its Go block is
// Example_quickstart's body between the quickstart markers, and its latch.yaml is the policy that
// example loads. Edit the example, then copy it into the README (or the reverse).
func TestReadmeQuickstart(t *testing.T) {
	t.Parallel()
	blocks := fencedBlocks(readmeSection(t, "Quickstart"))
	if len(blocks["go"]) != 1 || len(blocks["yaml"]) != 1 {
		t.Fatalf("README quickstart has %d go and %d yaml blocks, want one of each", len(blocks["go"]), len(blocks["yaml"]))
	}
	if diff := cmp.Diff(quickstartRegion(t), blocks["go"][0]); diff != "" {
		t.Errorf("README quickstart differs from Example_quickstart (-example +README):\n%s", diff)
	}
	if diff := cmp.Diff(quickstartPolicy, blocks["yaml"][0]); diff != "" {
		t.Errorf("README quickstart latch.yaml differs from the example's quickstartPolicy (-example +README):\n%s", diff)
	}
}

// TestDocGoQuickstart holds the package documentation's code to the quickstart example: every
// line of doc.go's code block is a line of Example_quickstart, so the tour compiles too.
func TestDocGoQuickstart(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	example := map[string]bool{}
	for _, line := range strings.Split(quickstartRegion(t), "\n") {
		example[strings.TrimSpace(line)] = true
	}
	n := 0
	for i, line := range strings.Split(string(b), "\n") {
		code, ok := strings.CutPrefix(line, "//\t")
		if !ok || strings.TrimSpace(code) == "…" {
			continue
		}
		n++
		if !example[strings.TrimSpace(code)] {
			t.Errorf("doc.go:%d: %q is not a line of Example_quickstart", i+1, strings.TrimSpace(code))
		}
	}
	if n == 0 {
		t.Errorf("doc.go has no code block")
	}
}

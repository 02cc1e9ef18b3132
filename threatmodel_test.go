package latch_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/verify"
)

var (
	// testRef is a proof by test in docs/threat-model.md: `path/to/file_test.go` `TestName`.
	testRef = regexp.MustCompile("`([\\w./-]+_test\\.go)` `(Test\\w+)`")
	// anyTestName is every test name in backticks, with or without its file.
	anyTestName = regexp.MustCompile("`(Test\\w+)`")
	// guaranteeRef is a proof by `latch verify` guarantee: `G27`, `L4`.
	guaranteeRef = regexp.MustCompile("`([GL]\\d+)`")
	// owaspRow is the first cell of a row of the OWASP tables.
	owaspRow = regexp.MustCompile(`^\| (LLM\d\d|T\d+) `)
)

// threatModelProblems returns what is wrong with the threat model doc: a named test whose file
// lacks it (funcExists answers), a guarantee id not in ids, a test named without its file, a
// table row that names no proof, and OWASP tables that do not list LLM01–LLM10 and T1–T15 in
// order.
func threatModelProblems(doc string, funcExists func(file, name string) bool, ids []string) []string {
	var problems []string
	lines := strings.Split(doc, "\n")
	var owasp []string
	for i, line := range lines {
		where := "line " + strconv.Itoa(i+1)
		refs := testRef.FindAllStringSubmatch(line, -1)
		for _, m := range refs {
			if !funcExists(m[1], m[2]) {
				problems = append(problems, where+": "+m[1]+" has no func "+m[2])
			}
		}
		if n := len(anyTestName.FindAllString(line, -1)); n != len(refs) {
			problems = append(problems, where+": a test is named without its file (`file_test.go` `TestName`)")
		}
		gs := guaranteeRef.FindAllStringSubmatch(line, -1)
		for _, m := range gs {
			if !slices.Contains(ids, m[1]) {
				problems = append(problems, where+": "+m[1]+" is not a latch verify guarantee")
			}
		}
		isRow := strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "|---")
		isHeader := i+1 < len(lines) && strings.HasPrefix(lines[i+1], "|---")
		if isRow && !isHeader && len(refs) == 0 && len(gs) == 0 {
			problems = append(problems, where+": a row names no test and no guarantee: "+line)
		}
		if m := owaspRow.FindStringSubmatch(line); m != nil {
			owasp = append(owasp, m[1])
		}
	}
	var want []string
	for i := 1; i <= 10; i++ {
		want = append(want, fmt.Sprintf("LLM%02d", i))
	}
	for i := 1; i <= 15; i++ {
		want = append(want, "T"+strconv.Itoa(i))
	}
	if !slices.Equal(owasp, want) {
		problems = append(problems, "the OWASP rows are ["+strings.Join(owasp, " ")+"], want ["+strings.Join(want, " ")+"]")
	}
	return problems
}

// funcInFile reports whether the Go file at path (relative to the module root) declares the
// function name.
func funcInFile(path, name string) bool {
	src, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		return false
	}
	return regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(name) + `\(`).Match(src)
}

// TestThreatModelProofsExist holds docs/threat-model.md to its word: every test it names exists
// in the file it names, every guarantee id is in the latch verify catalogue, every row of its
// tables names at least one of them, and the OWASP tables list every risk and threat.
func TestThreatModelProofsExist(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("docs", "threat-model.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(testRef.FindAllString(string(doc), -1)); n < 40 {
		t.Fatalf("docs/threat-model.md names %d tests; the pattern is not finding them", n)
	}
	for _, p := range threatModelProblems(string(doc), funcInFile, verify.IDs()) {
		t.Errorf("docs/threat-model.md: %s", p)
	}
}

// TestThreatModelCheckerCatchesRot: the checker above refuses a missing test, a test in the
// wrong file, an unknown id, a bare test name, a row without proof and a missing OWASP row.
func TestThreatModelCheckerCatchesRot(t *testing.T) {
	t.Parallel()
	doc := "| Risk | Proof |\n|---|---|\n" +
		"| x | `latch_test.go` `TestNoSuchThing` |\n" +
		"| y | `gateway/gateway_test.go` `TestMaxAttempts` |\n" +
		"| z | `G99` |\n" +
		"| w | `TestMaxAttempts` |\n" +
		"| v | nothing |\n" +
		"| LLM01 Prompt Injection | `G1` |\n"
	got := threatModelProblems(doc, funcInFile, verify.IDs())
	for _, want := range []string{
		"line 3: latch_test.go has no func TestNoSuchThing",
		"line 4: gateway/gateway_test.go has no func TestMaxAttempts",
		"line 5: G99 is not a latch verify guarantee",
		"line 6: a test is named without its file",
		"line 7: a row names no test and no guarantee",
		"the OWASP rows are [LLM01], want [LLM01 LLM02",
	} {
		if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("threatModelProblems missed %q; it said:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if ok := threatModelProblems("| LLM01 x | `latch_test.go` `TestMaxAttempts` |\n", funcInFile, verify.IDs()); len(ok) != 1 {
		t.Errorf("a good row gave %v, want only the missing OWASP rows", ok)
	}
}

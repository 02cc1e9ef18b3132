package policy

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchkit/latch/canon"
	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the want section of testdata/cases/*.txtar")

// corpusFiles returns the decision corpus: each archive holds policy.yaml, call.json
// ({"action": …, "arguments": {…}}) and want. Without call.json the case is about loading:
// want is the load error, or the policy's warnings when it loads.
func corpusFiles(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "cases", "*.txtar"))
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

func archiveFile(ar *txtar.Archive, name string) ([]byte, bool) {
	for _, f := range ar.Files {
		if f.Name == name {
			return f.Data, true
		}
	}
	return nil, false
}

func TestCorpus(t *testing.T) {
	t.Parallel()
	files := corpusFiles(t)
	if len(files) < 40 {
		t.Fatalf("corpus has %d cases, want at least 40", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			t.Parallel()
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got := runCase(t, ar)
			want, _ := archiveFile(ar, "want")
			if *update {
				if bytes.Equal(got, want) {
					return
				}
				setArchiveFile(ar, "want", got)
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: got\n%s\nwant\n%s\n(run go test -run TestCorpus -update to accept)", file, got, want)
			}
		})
	}
}

func setArchiveFile(ar *txtar.Archive, name string, data []byte) {
	for i := range ar.Files {
		if ar.Files[i].Name == name {
			ar.Files[i].Data = data
			return
		}
	}
	ar.Files = append(ar.Files, txtar.File{Name: name, Data: data})
}

func runCase(t *testing.T, ar *txtar.Archive) []byte {
	t.Helper()
	src, ok := archiveFile(ar, "policy.yaml")
	if !ok {
		t.Fatal("archive has no policy.yaml")
	}
	p, err := Parse("policy.yaml", src)
	if err != nil {
		return []byte("error: " + err.Error() + "\n")
	}
	callJSON, ok := archiveFile(ar, "call.json")
	if !ok {
		// A policy that loads with no call: the case is about what latch check warns.
		return []byte(renderWarnings(p.Warnings()))
	}
	v, err := canon.Parse(callJSON)
	if err != nil {
		t.Fatalf("call.json: %v", err)
	}
	call, _ := v.(map[string]any)
	action, _ := call["action"].(string)
	args, _ := call["arguments"].(map[string]any)
	if action == "" || (call["arguments"] != nil && args == nil) {
		t.Fatalf(`call.json is not {"action": "…", "arguments": {…}}: %s`, callJSON)
	}
	return []byte(renderEvaluation(p.Evaluate(action, args)))
}

// renderEvaluation is the compact form of an evaluation used in the corpus.
func renderEvaluation(ev Evaluation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "decision: %s\nreason: %s\n", ev.Decision, ev.Reason)
	if a := ev.Arguments; !a.OK() {
		fmt.Fprintf(&b, "arguments: %s at %s: %s\n", a.Reason, a.Pointer, a.Msg)
	}
	if len(ev.Trace) > 0 {
		b.WriteString("trace:\n")
	}
	for _, rt := range ev.Trace {
		fmt.Fprintf(&b, "  rule[%d]: %s\n", rt.Index, pick(rt.Matched, "matched", "not matched"))
		for _, c := range rt.Conditions {
			fmt.Fprintf(&b, "    %s: %s, %s\n", c.Key, pick(c.Held, "held", "not held"), c.Why)
		}
	}
	return b.String()
}

// renderWarnings is the compact form of a policy's warnings used in the corpus.
func renderWarnings(ws []Warning) string {
	if len(ws) == 0 {
		return "warnings: none\n"
	}
	var b strings.Builder
	b.WriteString("warnings:\n")
	for _, w := range ws {
		fmt.Fprintf(&b, "  policy.yaml:%d:%d: %s: %s\n", w.Pos.Line, w.Pos.Column, w.Code, w.Msg)
	}
	return b.String()
}

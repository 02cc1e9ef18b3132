package scan_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/latchkit/latch/scan"
)

func TestParseConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"empty", "", "latch.scan.yaml:1: empty document: want a mapping with version and calls"},
		{"not yaml", "version: 1\ncalls: [\n", "latch.scan.yaml:2: not YAML: did not find expected node content"},
		{"no version", "calls: []\n", "latch.scan.yaml:1: version: missing (want version: 1)"},
		{"bad version", "version: 2\n", "latch.scan.yaml:1: version: unsupported version \"2\" (want 1)"},
		{"unknown top", "version: 1\ncall: []\n", "latch.scan.yaml:2: call: unknown field (known: version, calls, wrappers, integrations)"},
		{"no calls", "version: 1\n", "latch.scan.yaml:1: calls: missing: list the consequential calls to look for"},
		{"empty calls", "version: 1\ncalls: []\n", "latch.scan.yaml:2: calls: want a non-empty list of {package, func}"},
		{"missing func", "version: 1\ncalls:\n  - package: example.com/pay\n", "latch.scan.yaml:3: calls[0].func: missing"},
		{"unknown rule field", "version: 1\ncalls:\n  - package: p\n    func: F\n    arg: [x]\n", "latch.scan.yaml:5: calls[0].arg: unknown field (known: package, func, args, hosts, methods, why)"},
		{"bad func", "version: 1\ncalls:\n  - package: p\n    func: (*Client.Charge\n", "latch.scan.yaml:4: calls[0].func: want Name, (Type).Name or (*Type).Name, got \"(*Client.Charge\""},
		{"bad receiver", "version: 1\ncalls:\n  - package: p\n    func: (**C).Charge\n", "latch.scan.yaml:4: calls[0].func: receiver \"**C\" is not a type name"},
		{"bad package", "version: 1\ncalls:\n  - package: \"(p)\"\n    func: F\n", "latch.scan.yaml:3: calls[0].package: want an import path, got \"(p)\""},
		{"hosts off http", "version: 1\ncalls:\n  - package: p\n    func: F\n  - package: os/exec\n    func: Command\n    hosts: [x]\n", "latch.scan.yaml:7: calls[1].hosts: only for package net/http (this rule is for os/exec)"},
		{"bad arg pattern", "version: 1\ncalls:\n  - package: os/exec\n    func: Command\n    args: [git, \"[\"]\n", "latch.scan.yaml:5: calls[0].args[1]: bad pattern \"[\": syntax error in pattern"},
		{"args not strings", "version: 1\ncalls:\n  - package: os/exec\n    func: Command\n    args: [git, [push]]\n", "latch.scan.yaml:5: calls[0].args[1]: want a string"},
		{"wrapper without arg", "version: 1\ncalls:\n  - package: p\n    func: F\nwrappers:\n  - package: q\n    func: Run\n", "latch.scan.yaml:6: wrappers[0].arg: missing: the index of the argument that runs under latch"},
		{"wrapper negative arg", "version: 1\ncalls:\n  - package: p\n    func: F\nwrappers:\n  - package: q\n    func: Run\n    arg: -1\n", "latch.scan.yaml:8: wrappers[0].arg: want an argument index, 0 or more"},
		{"wrapper bad kind", "version: 1\ncalls:\n  - package: p\n    func: F\nwrappers:\n  - package: q\n    func: Run\n    kind: around\n", "latch.scan.yaml:8: wrappers[0].kind: unknown kind \"around\" (want func or begin)"},
		{"begin with arg", "version: 1\ncalls:\n  - package: p\n    func: F\nwrappers:\n  - package: q\n    func: Start\n    kind: begin\n    arg: 0\n", "latch.scan.yaml:9: wrappers[0].arg: not for kind begin: a begin wrapper protects the statements after it"},
		{"bad method", "version: 1\ncalls:\n  - package: p\n    func: F\nwrappers:\n  - package: q\n    func: Run\n    arg: 0\n    method: Do It\n", "latch.scan.yaml:9: wrappers[0].method: want a method name or *"},
		{"unknown integration", "version: 1\ncalls:\n  - package: p\n    func: F\nintegrations: [temporal, sidekiq]\n", "latch.scan.yaml:5: integrations[1]: unknown integration \"sidekiq\" (known: asynq_middleware, temporal)"},
		{"duplicate field", "version: 1\ncalls:\n  - package: p\n    package: q\n    func: F\n", "latch.scan.yaml:4: calls[0].package: given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := scan.ParseConfig("", []byte(tc.doc))
			var ce *scan.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseConfig(%q) = %v, want a *ConfigError", tc.doc, err)
			}
			if err.Error() != tc.want {
				t.Errorf("ParseConfig(%q) =\n  %v\nwant\n  %v", tc.doc, err, tc.want)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	doc := `version: 1
calls:
  - package: example.com/pay
    func: (*Client).Charge
    why: moves money
  - package: net/http
    func: (*Client).Do
    methods: [post]
    hosts: [api.pay.example]
wrappers:
  - package: example.com/jobs
    func: Run
    arg: 1
  - package: example.com/jobs
    func: Reserve
    kind: begin
integrations: [temporal]
`
	cfg, err := scan.ParseConfig("ci/latch.scan.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	if cfg.File != "ci/latch.scan.yaml" || len(cfg.Calls) != 2 || len(cfg.Wrappers) != 2 || len(cfg.Integrations) != 1 {
		t.Fatalf("ParseConfig = %+v", cfg)
	}
	if got := cfg.Calls[1].Methods; len(got) != 1 || got[0] != "POST" {
		t.Errorf("methods = %q, want [POST] (upper-cased)", got)
	}
	if w := cfg.Wrappers[0]; w.Kind != "func" || w.Arg != 1 {
		t.Errorf("wrappers[0] = %+v, want kind func, arg 1", w)
	}
	if w := cfg.Wrappers[1]; w.Kind != "begin" {
		t.Errorf("wrappers[1] = %+v, want kind begin", w)
	}
}

func TestFindConfig(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mod := filepath.Join(root, "mod")
	sub := filepath.Join(mod, "svc", "billing")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(path, data string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(mod, "go.mod"), "module example.com/m\n")
	// A file above the module root does not count.
	write(filepath.Join(root, scan.ConfigFile), "version: 1\n")
	if got, err := scan.FindConfig(sub); !errors.Is(err, scan.ErrNoConfig) {
		t.Fatalf("FindConfig(%s) = %q, %v, want ErrNoConfig", sub, got, err)
	}
	want := filepath.Join(mod, "svc", scan.ConfigFile)
	write(want, "version: 1\n")
	got, err := scan.FindConfig(sub)
	if err != nil || got != want {
		t.Errorf("FindConfig(%s) = %q, %v, want %q", sub, got, err, want)
	}
}

package scan

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/token"
	"go/types"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"

	"golang.org/x/tools/go/analysis"
)

// Analyzer is the scan as a go/analysis analyzer. Its configuration is the file named by its
// -config flag or, without one, the ConfigFile found from each package's directory up to its
// module root (FindConfig); a package with neither is an error.
var Analyzer = newAnalyzer(nil)

// New returns an analyzer that uses cfg instead of reading a configuration file.
func New(cfg *Config) *analysis.Analyzer { return newAnalyzer(cfg) }

func newAnalyzer(cfg *Config) *analysis.Analyzer {
	a := &analysis.Analyzer{
		Name:       "latchscan",
		Doc:        "report calls of consequential APIs that are not reached through latch\n\nA call listed in the scan configuration (latch.scan.yaml) must run inside a function given to latch.Protect, Guard.Execute or a latch integration wrapper, or after a checked Guard.Begin; see docs/scan.md.",
		URL:        "https://github.com/latchkit/latch/blob/main/docs/scan.md",
		FactTypes:  []analysis.Fact{new(GuardedFact)},
		ResultType: reflect.TypeFor[*Result](),
	}
	l := &loader{fixed: cfg}
	if cfg == nil {
		a.Flags.StringVar(&l.path, "config", "", "scan configuration file (default: "+ConfigFile+" found from the package's directory up to its module root)")
	}
	a.Run = l.run
	return a
}

// Result is what the analyzer found in one package, beyond its diagnostics: the report
// `latch scan` prints.
type Result struct {
	// Findings are the unprotected references reported as diagnostics.
	Findings []Finding
	// Allows are the //latch:allow comments that suppressed a finding, with their reasons.
	Allows []Allow
}

// Finding is one unprotected reference to a consequential API.
type Finding struct {
	Pos     token.Position
	Callee  string // the function's full name, "(*example.com/pay.Client).Charge"
	Message string
}

// Allow is one //latch:allow comment that suppressed a finding.
type Allow struct {
	Pos    token.Position // of the comment
	Reason string
	Callee string // what it allowed
	Call   token.Position
}

// GuardedFact marks an exported function of another package that makes consequential calls
// expecting to run under latch (its package passes it to a wrapper): calling it directly from
// outside latch is reported like calling the consequential API itself.
type GuardedFact struct {
	Calls string // the consequential calls it makes, for the message
}

// AFact marks GuardedFact as an analysis fact.
func (*GuardedFact) AFact() {}

func (f *GuardedFact) String() string { return "guarded(" + f.Calls + ")" }

// loader resolves the configuration of a run: the fixed one, the -config file, or the one
// found from the package's directory. Parsed files are cached: a vet or scan run analyses many
// packages with one configuration.
type loader struct {
	fixed *Config
	path  string
	cache sync.Map // file -> *loaded
}

type loaded struct {
	once sync.Once
	cfg  *Config
	err  error
}

func (l *loader) config(pass *analysis.Pass) (*Config, error) {
	if l.fixed != nil {
		return l.fixed, nil
	}
	file := l.path
	if file == "" {
		if len(pass.Files) == 0 {
			return &Config{}, nil
		}
		dir := filepath.Dir(pass.Fset.File(pass.Files[0].Pos()).Name())
		f, err := FindConfig(dir)
		if errors.Is(err, ErrNoConfig) && dependency(pass, dir) {
			// The analyzer also runs over dependencies, for their facts; one without its own
			// configuration (the standard library, a module from the cache) has none to give.
			return &Config{}, nil
		}
		if err != nil {
			return nil, err
		}
		file = f
	}
	v, _ := l.cache.LoadOrStore(file, &loaded{})
	ld := v.(*loaded)
	ld.once.Do(func() { ld.cfg, ld.err = LoadConfig(file) })
	return ld.cfg, ld.err
}

// dependency says whether the package is the standard library's or another module's at a
// version, which a missing configuration does not make an error.
func dependency(pass *analysis.Pass, dir string) bool {
	if pass.Module != nil && pass.Module.Version != "" {
		return true
	}
	root := build.Default.GOROOT
	if root == "" {
		return false
	}
	rel, err := filepath.Rel(filepath.Join(root, "src"), dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func (l *loader) run(pass *analysis.Pass) (any, error) {
	cfg, err := l.config(pass)
	if err != nil {
		return nil, err
	}
	rules, err := cfg.rules()
	if err != nil {
		return nil, err
	}
	s := newState(pass, rules, cfg.wrappers())
	s.index()
	s.solve()
	return s.report(), nil
}

// reference is one mention of a consequential function.
type reference struct {
	expr   ast.Expr // the identifier or selector naming it
	callee *types.Func
	call   *ast.CallExpr // when expr is called here
	rule   *Rule         // nil for a GuardedFact callee
	fact   *GuardedFact
}

func (s *state) report() *Result {
	res := &Result{}
	allows := s.allowComments()
	var findings []reference
	for _, ref := range s.references() {
		if s.protectedUses(s.usesOfRef(ref)) {
			continue
		}
		findings = append(findings, ref)
	}
	for _, ref := range findings {
		pos := s.pass.Fset.Position(ref.expr.Pos())
		if ref.call != nil {
			pos = s.pass.Fset.Position(ref.call.Pos())
		}
		name := ref.callee.FullName()
		if a := allows.at(pos); a != nil && a.reason != "" {
			a.used = true
			res.Allows = append(res.Allows, Allow{Pos: a.pos, Reason: a.reason, Callee: name, Call: pos})
			continue
		} else if a != nil {
			a.used = true // reported below as reasonless; the finding stands
		}
		msg := s.message(ref, name)
		start, end := ref.expr.Pos(), ref.expr.End()
		if ref.call != nil {
			start, end = ref.call.Pos(), ref.call.End()
		}
		s.pass.Report(analysis.Diagnostic{Pos: start, End: end, Category: "unprotected", Message: msg})
		res.Findings = append(res.Findings, Finding{Pos: pos, Callee: name, Message: msg})
	}
	for _, a := range allows.all {
		switch {
		case a.reason == "":
			s.pass.Report(analysis.Diagnostic{Pos: a.comment.Pos(), End: a.comment.End(), Category: "allow",
				Message: "//latch:allow needs a reason (//latch:allow <why this call may run outside latch>); without one it suppresses nothing"})
		case !a.used:
			s.pass.Report(analysis.Diagnostic{Pos: a.comment.Pos(), End: a.comment.End(), Category: "allow",
				Message: "//latch:allow suppresses nothing: no unprotected consequential call on this line or the next"})
		}
	}
	s.exportFacts()
	return res
}

func (s *state) message(ref reference, name string) string {
	var b strings.Builder
	switch {
	case ref.call != nil:
		fmt.Fprintf(&b, "unprotected call to %s", name)
	default:
		fmt.Fprintf(&b, "%s used as a value outside latch: its calls are not reached through a latch wrapper", name)
	}
	switch {
	case ref.fact != nil:
		fmt.Fprintf(&b, " (it makes consequential calls, %s, that expect to run under latch)", ref.fact.Calls)
	case ref.rule.Why != "":
		fmt.Fprintf(&b, " (%s)", ref.rule.Why)
	}
	if ref.call != nil {
		b.WriteString(": not inside a function given to latch.Protect, Guard.Execute or a wrapper, nor after a checked Guard.Begin")
	}
	return b.String()
}

// references finds every mention of a consequential function in the package: a configured rule's
// (with its argument filters) or an imported function carrying a GuardedFact.
func (s *state) references() []reference {
	var out []reference
	for _, f := range s.pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			fn, ok := s.pass.TypesInfo.Uses[id].(*types.Func)
			if !ok {
				return true
			}
			fn = fn.Origin()
			expr := s.valueExpr(id)
			call := s.calledAt(expr)
			ref := reference{expr: expr, callee: fn, call: call}
			if r := s.matchRule(fn, call); r != nil {
				ref.rule = r
				out = append(out, ref)
				return true
			}
			if fn.Pkg() != nil && fn.Pkg() != s.pass.Pkg {
				var fact GuardedFact
				if s.pass.ImportObjectFact(fn, &fact) {
					ref.fact = &fact
					out = append(out, ref)
				}
			}
			return true
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].expr.Pos() < out[j].expr.Pos() })
	return out
}

// usesOfRef is how the consequential function flows from the reference: a call there, or a
// value whose uses classify says.
func (s *state) usesOfRef(ref reference) []use {
	return s.classify(ref.expr, 0)
}

// exportFacts marks the package's exported protected functions that lead to a consequential
// call, so that a package calling them directly is told.
func (s *state) exportFacts() {
	carries := map[*fnode][]string{}
	var mark func(n *fnode, callee string, depth int)
	mark = func(n *fnode, callee string, depth int) {
		if n == nil || !s.protected[n] || depth > 64 || containsStr(carries[n], callee) {
			return
		}
		carries[n] = append(carries[n], callee)
		for _, u := range n.uses {
			if u.kind == useCall && !s.beginGuarded(u.site) {
				mark(s.containerOf(u.site), callee, depth+1)
			}
		}
	}
	for _, ref := range s.references() {
		if ref.rule == nil {
			continue
		}
		for _, u := range s.usesOfRef(ref) {
			if u.kind == useCall && !s.beginGuarded(u.site) {
				mark(s.containerOf(u.site), ref.callee.FullName(), 0)
			}
		}
	}
	for n, calls := range carries {
		if n.obj != nil && n.obj.Exported() {
			sort.Strings(calls)
			s.pass.ExportObjectFact(n.obj, &GuardedFact{Calls: strings.Join(calls, ", ")})
		}
	}
}

func containsStr(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

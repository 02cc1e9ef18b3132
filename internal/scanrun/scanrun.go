// Package scanrun runs latch's scan analyzer over packages loaded with go/packages: the driver
// behind `latch scan`.
//
// It type-checks only the packages it is given, from source, with their dependencies' types
// from the build's export data — so scanning a program does not type-check every dependency
// from source, as a general analysis driver must for facts. Facts (scan.GuardedFact) flow
// between the given packages, which are analysed in import order; a dependency outside them
// contributes none. `go vet -vettool` with cmd/latch-vet analyses every dependency instead.
package scanrun

import (
	"context"
	"errors"
	"fmt"
	"go/token"
	"go/types"
	"os"
	"reflect"
	"sort"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/types/objectpath"

	"github.com/latchkit/latch/scan"
)

// Options says what to scan.
type Options struct {
	Config   *scan.Config
	Dir      string   // where patterns are resolved; "" is the working directory
	Patterns []string // go package patterns; none is "./..."
	Tests    bool     // include test files
}

// Diagnostic is one report.
type Diagnostic struct {
	Pos      token.Position
	End      token.Position
	Category string // "unprotected" or "allow"
	Message  string
}

// Report is what a scan found, sorted by position.
type Report struct {
	Packages    int
	Diagnostics []Diagnostic
	Allows      []scan.Allow
}

// Unprotected counts the diagnostics of unprotected calls.
func (r *Report) Unprotected() int {
	n := 0
	for _, d := range r.Diagnostics {
		if d.Category == "unprotected" {
			n++
		}
	}
	return n
}

// LoadError is a package that could not be loaded or type-checked: the scan would be blind to it.
type LoadError struct {
	Errors []string
}

func (e *LoadError) Error() string {
	msg := strings.Join(e.Errors, "; ")
	if len(e.Errors) > 3 {
		msg = strings.Join(e.Errors[:3], "; ") + fmt.Sprintf("; and %d more", len(e.Errors)-3)
	}
	return "load packages: " + msg
}

// Run loads the packages and scans them.
func Run(ctx context.Context, opts *Options) (*Report, error) {
	patterns := opts.Patterns
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	cfg := &packages.Config{
		Context: ctx,
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes |
			packages.NeedTypesInfo | packages.NeedTypesSizes | packages.NeedImports | packages.NeedModule,
		Dir:   opts.Dir,
		Tests: opts.Tests,
		Env:   os.Environ(),
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, fmt.Errorf("load packages: %w", err)
	}
	var loadErrs []string
	for _, p := range pkgs {
		for _, e := range p.Errors {
			if e.Pos == "" || e.Pos == "-" {
				loadErrs = append(loadErrs, e.Msg) // "-" is go/packages' "no position"
			} else {
				loadErrs = append(loadErrs, e.Pos+": "+e.Msg)
			}
		}
	}
	if len(loadErrs) > 0 {
		return nil, &LoadError{Errors: loadErrs}
	}
	if len(pkgs) == 0 {
		return nil, errors.New("load packages: no packages match " + strings.Join(patterns, " "))
	}
	analyzer := scan.New(opts.Config)
	facts := map[factKey]analysis.Fact{}
	rep := &Report{}
	for _, p := range importOrder(pkgs) {
		if err := analyze(analyzer, p, facts, rep); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(rep.Diagnostics, func(i, j int) bool { return less(rep.Diagnostics[i].Pos, rep.Diagnostics[j].Pos) })
	sort.SliceStable(rep.Allows, func(i, j int) bool { return less(rep.Allows[i].Pos, rep.Allows[j].Pos) })
	return rep, nil
}

func less(a, b token.Position) bool {
	if a.Filename != b.Filename {
		return a.Filename < b.Filename
	}
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	return a.Column < b.Column
}

// importOrder sorts the packages so that each comes after those of them it imports. With
// tests, it drops the test-binary mains and each package that has a test variant ("p [p.test]"
// holds all of p's files and its in-package tests): scanning both would report p's files twice.
func importOrder(pkgs []*packages.Package) []*packages.Package {
	byID := map[string]*packages.Package{}
	for _, p := range pkgs {
		byID[p.ID] = p
	}
	variant := map[string]string{} // package path -> ID of its test variant
	for _, p := range pkgs {
		if i := strings.Index(p.ID, " ["); i > 0 && p.PkgPath == p.ID[:i] {
			variant[p.PkgPath] = p.ID
		}
	}
	seen := map[string]bool{}
	var out []*packages.Package
	var visit func(p *packages.Package)
	visit = func(p *packages.Package) {
		if seen[p.ID] {
			return
		}
		seen[p.ID] = true
		ids := make([]string, 0, len(p.Imports))
		for _, imp := range p.Imports {
			ids = append(ids, imp.ID)
		}
		sort.Strings(ids)
		for _, id := range ids {
			if dep, ok := byID[id]; ok {
				if v, ok := variant[dep.PkgPath]; ok && dep.ID == dep.PkgPath {
					dep = byID[v] // its facts come from the variant that is scanned
				}
				visit(dep)
			}
		}
		if !strings.HasSuffix(p.ID, ".test") && !(p.ID == p.PkgPath && variant[p.PkgPath] != "") {
			out = append(out, p)
		}
	}
	for _, p := range pkgs {
		visit(p)
	}
	return out
}

// factKey names an object across type-checks: its package path and object path.
type factKey struct {
	pkg, obj string
}

func keyOf(obj types.Object) (factKey, bool) {
	if obj.Pkg() == nil {
		return factKey{}, false
	}
	path, err := objectpath.For(obj)
	if err != nil {
		return factKey{}, false
	}
	return factKey{obj.Pkg().Path(), string(path)}, true
}

func analyze(a *analysis.Analyzer, p *packages.Package, facts map[factKey]analysis.Fact, rep *Report) error {
	pass := &analysis.Pass{
		Analyzer:   a,
		Fset:       p.Fset,
		Files:      p.Syntax,
		OtherFiles: p.OtherFiles,
		Pkg:        p.Types,
		TypesInfo:  p.TypesInfo,
		TypesSizes: p.TypesSizes,
		ResultOf:   map[*analysis.Analyzer]any{},
		ReadFile:   os.ReadFile,
		Report: func(d analysis.Diagnostic) {
			end := d.End
			if !end.IsValid() {
				end = d.Pos
			}
			rep.Diagnostics = append(rep.Diagnostics, Diagnostic{
				Pos: p.Fset.Position(d.Pos), End: p.Fset.Position(end), Category: d.Category, Message: d.Message,
			})
		},
		ImportObjectFact: func(obj types.Object, ptr analysis.Fact) bool {
			k, ok := keyOf(obj)
			if !ok {
				return false
			}
			f, ok := facts[k]
			if !ok || reflect.TypeOf(f) != reflect.TypeOf(ptr) {
				return false
			}
			reflect.ValueOf(ptr).Elem().Set(reflect.ValueOf(f).Elem())
			return true
		},
		ExportObjectFact: func(obj types.Object, f analysis.Fact) {
			if k, ok := keyOf(obj); ok {
				facts[k] = f
			}
		},
		ImportPackageFact: func(*types.Package, analysis.Fact) bool { return false },
		ExportPackageFact: func(analysis.Fact) {},
		AllObjectFacts:    func() []analysis.ObjectFact { return nil },
		AllPackageFacts:   func() []analysis.PackageFact { return nil },
	}
	if p.Module != nil {
		pass.Module = &analysis.Module{Path: p.Module.Path, Version: p.Module.Version, GoVersion: p.Module.GoVersion}
	}
	res, err := a.Run(pass)
	if err != nil {
		return fmt.Errorf("scan %s: %w", p.PkgPath, err)
	}
	if r, ok := res.(*scan.Result); ok && r != nil {
		rep.Allows = append(rep.Allows, r.Allows...)
	}
	rep.Packages++
	return nil
}

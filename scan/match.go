package scan

import (
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"net/url"
	"path"
	"strings"

	"golang.org/x/tools/go/types/typeutil"
)

// matchFunc says whether fn is the function pkg.name, or the method name of the named type recv
// declared in pkg (pointer receiver or not; an interface's method when recv is an interface).
func matchFunc(fn *types.Func, pkg, recv, name string) bool {
	if fn.Pkg() == nil || trimVendor(fn.Pkg().Path()) != pkg {
		return false
	}
	if ok, _ := path.Match(name, fn.Name()); !ok {
		return false
	}
	sig, _ := fn.Type().(*types.Signature)
	var r *types.Var
	if sig != nil {
		r = sig.Recv()
	}
	if recv == "" {
		return r == nil
	}
	if r == nil {
		return false
	}
	t := r.Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	switch t := t.(type) {
	case *types.Named:
		return t.Obj().Name() == recv
	case *types.Alias:
		return t.Obj().Name() == recv
	}
	return false
}

// trimVendor turns a vendored import path back into the package's own.
func trimVendor(p string) string {
	if i := strings.LastIndex(p, "/vendor/"); i >= 0 {
		return p[i+len("/vendor/"):]
	}
	return strings.TrimPrefix(p, "vendor/")
}

// matchRule returns the rule fn matches at this reference. Rules with argument, host or method
// filters match only calls whose filtered values are statically known and match.
func (s *state) matchRule(fn *types.Func, call *ast.CallExpr) *Rule {
	for i := range s.rules {
		r := &s.rules[i]
		if !matchFunc(fn, r.Package, r.recv, r.name) {
			continue
		}
		filtered := len(r.Args) > 0 || len(r.Hosts) > 0 || len(r.Methods) > 0
		if !filtered {
			return r
		}
		if call == nil {
			continue // a value: its arguments are not known here
		}
		if len(r.Args) > 0 && !s.argsMatch(r.Args, call) {
			continue
		}
		if (len(r.Hosts) > 0 || len(r.Methods) > 0) && !s.requestMatches(r, fn, call, 0) {
			continue
		}
		return r
	}
	return nil
}

// argsMatch says whether the call's leading arguments are constants matching the patterns.
func (s *state) argsMatch(patterns []string, call *ast.CallExpr) bool {
	for i, pat := range patterns {
		if pat == "*" {
			continue
		}
		if i >= len(call.Args) {
			return false
		}
		if call.Ellipsis.IsValid() && i == len(call.Args)-1 {
			return false // a spread slice: the values are not known
		}
		v, ok := s.constString(call.Args[i])
		if !ok {
			return false
		}
		if ok, _ := path.Match(pat, v); !ok {
			return false
		}
	}
	return true
}

func (s *state) constString(e ast.Expr) (string, bool) {
	tv, ok := s.pass.TypesInfo.Types[e]
	if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(tv.Value), true
}

// requestMatches finds the HTTP method and URL of a net/http call — the function's name says the
// method of Get, Head, Post and PostForm; NewRequest and NewRequestWithContext take both;
// (*Client).Do takes a request made in the same function by NewRequest — and says whether both
// are known and match the rule.
func (s *state) requestMatches(r *Rule, fn *types.Func, call *ast.CallExpr, depth int) bool {
	method, rawURL, ok := s.request(fn, call, depth)
	if !ok {
		return false
	}
	if len(r.Methods) > 0 {
		if method == "" {
			return false
		}
		found := false
		for _, m := range r.Methods {
			if ok, _ := path.Match(m, strings.ToUpper(method)); ok {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if len(r.Hosts) > 0 {
		if rawURL == "" {
			return false
		}
		u, err := url.Parse(rawURL)
		if err != nil || u.Host == "" {
			return false
		}
		host := strings.ToLower(u.Hostname())
		found := false
		for _, h := range r.Hosts {
			if ok, _ := path.Match(strings.ToLower(h), host); ok {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// request returns the method and URL of a net/http call where they are constants ("" where not).
func (s *state) request(fn *types.Func, call *ast.CallExpr, depth int) (method, rawURL string, ok bool) {
	arg := func(i int) string {
		if i < len(call.Args) {
			v, _ := s.constString(call.Args[i])
			return v
		}
		return ""
	}
	switch fn.Name() {
	case "Get", "Head", "Post", "PostForm":
		m := strings.ToUpper(fn.Name())
		if m == "POSTFORM" {
			m = "POST"
		}
		return m, arg(0), true
	case "NewRequest":
		return arg(0), arg(1), true
	case "NewRequestWithContext":
		return arg(1), arg(2), true
	case "Do", "RoundTrip":
		if depth > 0 || len(call.Args) != 1 {
			return "", "", false
		}
		return s.requestOf(call.Args[0], depth)
	}
	return "", "", false
}

// requestOf traces a request variable to the one assignment that made it, in the same function,
// from http.NewRequest or http.NewRequestWithContext.
func (s *state) requestOf(e ast.Expr, depth int) (method, rawURL string, ok bool) {
	id, isID := ast.Unparen(e).(*ast.Ident)
	if !isID {
		return "", "", false
	}
	v, isVar := s.pass.TypesInfo.ObjectOf(id).(*types.Var)
	if !isVar {
		return "", "", false
	}
	var made *ast.CallExpr
	writes := 0
	for ref, obj := range s.pass.TypesInfo.Defs {
		if obj == v {
			if c := s.assignedCall(ref); c != nil {
				made = c
			}
			writes++
		}
	}
	for ref, obj := range s.pass.TypesInfo.Uses {
		if obj == v && s.assignedAt(ref) {
			if c := s.assignedCall(ref); c != nil {
				made = c
			}
			writes++
		}
	}
	if writes != 1 || made == nil {
		return "", "", false
	}
	fn, isFn := typeutil.Callee(s.pass.TypesInfo, made).(*types.Func)
	if !isFn || fn.Pkg() == nil || fn.Pkg().Path() != "net/http" {
		return "", "", false
	}
	return s.request(fn, made, depth+1)
}

// assignedCall returns the call whose first result is assigned to id ("req, err := f(...)").
func (s *state) assignedCall(id *ast.Ident) *ast.CallExpr {
	as, ok := s.parent[id].(*ast.AssignStmt)
	if !ok || len(as.Rhs) != 1 || len(as.Lhs) == 0 || as.Lhs[0] != id {
		return nil
	}
	call, _ := ast.Unparen(as.Rhs[0]).(*ast.CallExpr)
	return call
}

// allow is one //latch:allow comment.
type allow struct {
	comment *ast.Comment
	pos     token.Position
	reason  string
	used    bool
}

type allowSet struct {
	byLine map[string]map[int]*allow
	code   map[string]map[int]bool // lines that hold code, not only comments
	all    []*allow
}

// at returns the allow on the position's line, or alone on the line above it (an allow
// trailing the statement above is that statement's).
func (a *allowSet) at(p token.Position) *allow {
	lines := a.byLine[p.Filename]
	if x := lines[p.Line]; x != nil {
		return x
	}
	if a.code[p.Filename][p.Line-1] {
		return nil
	}
	return lines[p.Line-1]
}

const allowPrefix = "//latch:allow"

func (s *state) allowComments() *allowSet {
	set := &allowSet{byLine: map[string]map[int]*allow{}, code: map[string]map[int]bool{}}
	for _, f := range s.pass.Files {
		name := s.pass.Fset.Position(f.Pos()).Filename
		code := map[int]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n.(type) {
			case nil, *ast.CommentGroup, *ast.Comment:
				return false
			case *ast.Ident, *ast.BasicLit:
				code[s.pass.Fset.Position(n.Pos()).Line] = true
			}
			return true
		})
		set.code[name] = code
		for _, g := range f.Comments {
			for _, c := range g.List {
				rest, ok := strings.CutPrefix(c.Text, allowPrefix)
				if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
					continue
				}
				pos := s.pass.Fset.Position(c.Pos())
				a := &allow{comment: c, pos: pos, reason: strings.TrimSpace(rest)}
				if set.byLine[pos.Filename] == nil {
					set.byLine[pos.Filename] = map[int]*allow{}
				}
				set.byLine[pos.Filename][pos.Line] = a
				set.all = append(set.all, a)
			}
		}
	}
	return set
}

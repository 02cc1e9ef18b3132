package scan

import (
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/types/typeutil"
)

// The protection model, one package at a time.
//
// A function body — a declared function or method of the package, or a function literal — is a
// node. Each way a node can be reached is a use:
//
//   - entry: it is the argument a wrapper runs under latch (latch.Protect's fn, a river worker
//     whose Work the wrapper calls, ...);
//   - call: it is called at a site, which is protected when its own node is, or when the site
//     follows a checked Guard.Begin;
//   - escape: anything else — stored, returned, passed to another function, started with go —
//     after which the scan cannot say who calls it.
//
// A node is protected when it has uses, none escapes, and every call is from a protected site
// (the least fixed point, so mutual recursion with no way in stays unprotected). A local
// variable holding a function literal or a method value passes its uses through, provided it is
// never assigned again. Calls through an interface, reflection and other packages are not
// uses the scan sees: docs/scan.md says what that leaves out.

type useKind int

const (
	useEntry useKind = iota
	useCall
	useEscape
)

type use struct {
	kind useKind
	site ast.Node // the call, for useCall
}

// fnode is one function body.
type fnode struct {
	body ast.Node    // *ast.FuncDecl or *ast.FuncLit
	obj  *types.Func // for a declaration
	uses []use
}

type state struct {
	pass      *analysis.Pass
	rules     []Rule
	wrappers  []Wrapper
	parent    map[ast.Node]ast.Node
	decls     map[*types.Func]*fnode
	lits      map[*ast.FuncLit]*fnode
	nodes     []*fnode
	protected map[*fnode]bool
	guardMemo map[ast.Node]bool
}

func newState(pass *analysis.Pass, rules []Rule, wrappers []Wrapper) *state {
	return &state{
		pass: pass, rules: rules, wrappers: wrappers,
		parent:    map[ast.Node]ast.Node{},
		decls:     map[*types.Func]*fnode{},
		lits:      map[*ast.FuncLit]*fnode{},
		protected: map[*fnode]bool{},
		guardMemo: map[ast.Node]bool{},
	}
}

// index records every node's parent and every function body, then every body's uses.
func (s *state) index() {
	for _, f := range s.pass.Files {
		var stack []ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			if len(stack) > 0 {
				s.parent[n] = stack[len(stack)-1]
			}
			stack = append(stack, n)
			switch n := n.(type) {
			case *ast.FuncDecl:
				if fn, ok := s.pass.TypesInfo.Defs[n.Name].(*types.Func); ok && n.Body != nil {
					node := &fnode{body: n, obj: fn}
					s.decls[fn] = node
					s.nodes = append(s.nodes, node)
				}
			case *ast.FuncLit:
				node := &fnode{body: n}
				s.lits[n] = node
				s.nodes = append(s.nodes, node)
			}
			return true
		})
	}
	for _, f := range s.pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				if fn, ok := s.pass.TypesInfo.Uses[n].(*types.Func); ok {
					if node := s.decls[fn.Origin()]; node != nil {
						node.uses = append(node.uses, s.classify(s.valueExpr(n), 0)...)
					}
				}
			case *ast.FuncLit:
				node := s.lits[n]
				node.uses = append(node.uses, s.classify(n, 0)...)
			case *ast.CallExpr:
				s.methodEntries(n)
			}
			return true
		})
	}
	s.interfaceEscapes()
}

// interfaceEscapes marks as escaping the methods of the package's types that a value of the
// type makes reachable through an interface: passed as an interface argument (other than to
// a wrapper that runs it), assigned to an interface variable, returned as an interface.
// Whoever holds the interface may call them — river's Work on a worker registered without
// latchriver.Wrap, next to a wrapped one.
func (s *state) interfaceEscapes() {
	for _, f := range s.pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				s.callEscapes(n)
			case *ast.AssignStmt:
				if len(n.Lhs) == len(n.Rhs) {
					for i, r := range n.Rhs {
						s.escapeInto(r, s.pass.TypesInfo.TypeOf(n.Lhs[i]), n)
					}
				}
			case *ast.ValueSpec:
				if n.Type != nil {
					for _, v := range n.Values {
						s.escapeInto(v, s.pass.TypesInfo.TypeOf(n.Type), n)
					}
				}
			case *ast.ReturnStmt:
				if sig := s.signatureOf(s.containerOf(n)); sig != nil && sig.Results().Len() == len(n.Results) {
					for i, r := range n.Results {
						s.escapeInto(r, sig.Results().At(i).Type(), n)
					}
				}
			case *ast.CompositeLit:
				s.compositeEscapes(n)
			}
			return true
		})
	}
}

func (s *state) callEscapes(call *ast.CallExpr) {
	if tv, ok := s.pass.TypesInfo.Types[call.Fun]; ok && tv.IsType() {
		if len(call.Args) == 1 {
			s.escapeInto(call.Args[0], tv.Type, call)
		}
		return
	}
	sig, ok := s.pass.TypesInfo.TypeOf(call.Fun).Underlying().(*types.Signature)
	if !ok {
		return
	}
	w := s.wrapperOf(call)
	params := sig.Params()
	for i, arg := range call.Args {
		if w != nil && w.Kind == "func" && i == w.Arg {
			continue // the wrapper runs it under latch
		}
		var pt types.Type
		switch {
		case sig.Variadic() && i >= params.Len()-1:
			pt = params.At(params.Len() - 1).Type()
			if !call.Ellipsis.IsValid() {
				if sl, ok := pt.(*types.Slice); ok {
					pt = sl.Elem()
				}
			}
		case i < params.Len():
			pt = params.At(i).Type()
		}
		s.escapeInto(arg, pt, call)
	}
}

func (s *state) compositeEscapes(lit *ast.CompositeLit) {
	t := s.pass.TypesInfo.TypeOf(lit)
	if t == nil {
		return
	}
	switch u := t.Underlying().(type) {
	case *types.Struct:
		for i, e := range lit.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				if id, ok := kv.Key.(*ast.Ident); ok {
					if v, ok := s.pass.TypesInfo.ObjectOf(id).(*types.Var); ok {
						s.escapeInto(kv.Value, v.Type(), lit)
					}
				}
			} else if i < u.NumFields() {
				s.escapeInto(e, u.Field(i).Type(), lit)
			}
		}
	case *types.Slice, *types.Array, *types.Map:
		var elem types.Type
		switch u := u.(type) {
		case *types.Slice:
			elem = u.Elem()
		case *types.Array:
			elem = u.Elem()
		case *types.Map:
			elem = u.Elem()
		}
		for _, e := range lit.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				e = kv.Value
			}
			s.escapeInto(e, elem, lit)
		}
	}
}

// escapeInto marks the methods of e's type that the interface type target holds as escaping.
func (s *state) escapeInto(e ast.Expr, target types.Type, at ast.Node) {
	if target == nil || e == nil {
		return
	}
	iface, ok := target.Underlying().(*types.Interface)
	if !ok {
		return
	}
	t := s.pass.TypesInfo.TypeOf(e)
	if t == nil || types.IsInterface(t) {
		return
	}
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	named, ok := t.(*types.Named)
	if !ok || named.Obj().Pkg() != s.pass.Pkg {
		return
	}
	named = named.Origin()
	for i := 0; i < iface.NumMethods(); i++ {
		name := iface.Method(i).Name()
		for m := range named.Methods() {
			if m.Name() == name {
				if node := s.decls[m]; node != nil {
					node.uses = append(node.uses, use{kind: useEscape, site: at})
				}
			}
		}
	}
}

// signatureOf is the signature of a function body.
func (s *state) signatureOf(n *fnode) *types.Signature {
	if n == nil {
		return nil
	}
	if n.obj != nil {
		sig, _ := n.obj.Type().(*types.Signature)
		return sig
	}
	sig, _ := s.pass.TypesInfo.TypeOf(n.body.(*ast.FuncLit)).(*types.Signature)
	return sig
}

// methodEntries adds an entry to the methods a wrapper runs on the value it is given (river's
// Work on a worker), when their type is declared in this package.
func (s *state) methodEntries(call *ast.CallExpr) {
	w := s.wrapperOf(call)
	if w == nil || w.Method == "" || w.Arg >= len(call.Args) {
		return
	}
	t := s.pass.TypesInfo.TypeOf(call.Args[w.Arg])
	if t == nil {
		return
	}
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	named, ok := t.(*types.Named)
	if !ok || named.Obj().Pkg() != s.pass.Pkg {
		return
	}
	named = named.Origin()
	for m := range named.Methods() {
		if (w.Method == "*" && m.Exported()) || m.Name() == w.Method {
			if node := s.decls[m]; node != nil {
				node.uses = append(node.uses, use{kind: useEntry, site: call})
			}
		}
	}
}

// solve computes the least fixed point of "protected".
func (s *state) solve() {
	for changed := true; changed; {
		changed = false
		for _, n := range s.nodes {
			if s.protected[n] {
				continue
			}
			if s.nodeProtected(n) {
				s.protected[n] = true
				changed = true
			}
		}
	}
}

func (s *state) nodeProtected(n *fnode) bool {
	reached := false
	for _, u := range n.uses {
		switch u.kind {
		case useEscape:
			return false
		case useEntry:
			reached = true
		case useCall:
			if s.containerOf(u.site) == n {
				continue // recursion: reached only if reached otherwise
			}
			if !s.siteProtected(u.site) {
				return false
			}
			reached = true
		}
	}
	return reached
}

// protectedUses says whether a value with these uses only ever runs under latch.
func (s *state) protectedUses(uses []use) bool {
	if len(uses) == 0 {
		return false
	}
	for _, u := range uses {
		switch u.kind {
		case useEscape:
			return false
		case useCall:
			if !s.siteProtected(u.site) {
				return false
			}
		}
	}
	return true
}

func (s *state) siteProtected(site ast.Node) bool {
	if s.beginGuarded(site) {
		return true
	}
	c := s.containerOf(site)
	return c != nil && s.protected[c]
}

// containerOf is the innermost function body holding n; nil at package level.
func (s *state) containerOf(n ast.Node) *fnode {
	for p := s.parent[n]; p != nil; p = s.parent[p] {
		switch p := p.(type) {
		case *ast.FuncLit:
			return s.lits[p]
		case *ast.FuncDecl:
			if fn, ok := s.pass.TypesInfo.Defs[p.Name].(*types.Func); ok {
				return s.decls[fn]
			}
			return nil
		}
	}
	return nil
}

// valueExpr is the expression that denotes the function id names: id itself, pkg.F, x.M, T.M,
// or an explicit instantiation F[T].
func (s *state) valueExpr(id *ast.Ident) ast.Expr {
	var e ast.Expr = id
	if sel, ok := s.parent[id].(*ast.SelectorExpr); ok && sel.Sel == id {
		e = sel
	}
	switch p := s.parent[e].(type) {
	case *ast.IndexExpr:
		if p.X == e {
			e = p
		}
	case *ast.IndexListExpr:
		if p.X == e {
			e = p
		}
	}
	return e
}

// up returns e's parent, skipping parentheses, and the child the parent holds.
func (s *state) up(e ast.Node) (parent, child ast.Node) {
	child = e
	parent = s.parent[e]
	for {
		p, ok := parent.(*ast.ParenExpr)
		if !ok {
			return parent, child
		}
		child, parent = p, s.parent[p]
	}
}

// calledAt returns the call that calls e, if e is a call's function.
func (s *state) calledAt(e ast.Expr) *ast.CallExpr {
	p, child := s.up(e)
	if call, ok := p.(*ast.CallExpr); ok && call.Fun == child {
		if tv, ok := s.pass.TypesInfo.Types[call.Fun]; ok && tv.IsType() {
			return nil
		}
		return call
	}
	return nil
}

// classify says how the function value e flows: see the model above.
func (s *state) classify(e ast.Node, depth int) []use {
	if depth > 8 {
		return []use{{kind: useEscape}}
	}
	p, child := s.up(e)
	switch p := p.(type) {
	case *ast.CallExpr:
		if p.Fun == child {
			if tv, ok := s.pass.TypesInfo.Types[p.Fun]; ok && tv.IsType() {
				return []use{{kind: useEscape}} // the function converts a value: not ours
			}
			if g, ok := s.parent[p].(*ast.GoStmt); ok && g.Call == p {
				return []use{{kind: useEscape}} // runs after the wrapper may have returned
			}
			return []use{{kind: useCall, site: p}}
		}
		if tv, ok := s.pass.TypesInfo.Types[p.Fun]; ok && tv.IsType() {
			return s.classify(p, depth+1) // a conversion: the value flows on
		}
		if w := s.wrapperOf(p); w != nil && w.Kind == "func" && w.Arg < len(p.Args) && p.Args[w.Arg] == child {
			return []use{{kind: useEntry, site: p}}
		}
		return []use{{kind: useEscape}}
	case *ast.AssignStmt:
		if p.Tok != token.DEFINE && p.Tok != token.ASSIGN || len(p.Lhs) != len(p.Rhs) {
			return []use{{kind: useEscape}}
		}
		for i, r := range p.Rhs {
			if r == child {
				return s.viaVar(p.Lhs[i], depth)
			}
		}
	case *ast.ValueSpec:
		if len(p.Names) == len(p.Values) {
			for i, v := range p.Values {
				if v == child {
					return s.viaVar(p.Names[i], depth)
				}
			}
		}
	}
	return []use{{kind: useEscape}}
}

// viaVar follows a function value into a local variable: its uses are the variable's, when the
// variable is assigned only here and its address is never taken.
func (s *state) viaVar(lhs ast.Expr, depth int) []use {
	id, ok := lhs.(*ast.Ident)
	if !ok {
		return []use{{kind: useEscape}}
	}
	v, ok := s.pass.TypesInfo.ObjectOf(id).(*types.Var)
	if !ok || v.Parent() == nil || v.Parent() == s.pass.Pkg.Scope() || v.Parent() == types.Universe {
		return []use{{kind: useEscape}}
	}
	var uses []use
	for ref, obj := range s.pass.TypesInfo.Uses {
		if obj != v || ref == id {
			continue
		}
		if s.assignedAt(ref) {
			return []use{{kind: useEscape}}
		}
		uses = append(uses, s.classify(ref, depth+1)...)
	}
	if len(uses) == 0 {
		return []use{{kind: useEscape}} // held but never used: nothing to judge by
	}
	return uses
}

// assignedAt says whether the identifier is written (assigned, or its address taken).
func (s *state) assignedAt(id *ast.Ident) bool {
	p, child := s.up(id)
	switch p := p.(type) {
	case *ast.AssignStmt:
		for _, l := range p.Lhs {
			if l == child {
				return true
			}
		}
	case *ast.UnaryExpr:
		return p.Op == token.AND
	case *ast.IncDecStmt:
		return true
	}
	return false
}

// wrapperOf returns the wrapper call calls, if it is one.
func (s *state) wrapperOf(call *ast.CallExpr) *Wrapper {
	fn, ok := typeutil.Callee(s.pass.TypesInfo, call).(*types.Func)
	if !ok {
		return nil
	}
	fn = fn.Origin()
	for i := range s.wrappers {
		w := &s.wrappers[i]
		if matchFunc(fn, w.Package, w.recv, w.name) {
			return w
		}
	}
	return nil
}

// beginGuarded says whether site follows, in its own function body, a begin wrapper's call
// whose error is checked by an if that leaves the function:
//
//	p, err := g.Begin(ctx, call)
//	if err != nil {
//		return err
//	}
//	... site ...
func (s *state) beginGuarded(site ast.Node) bool {
	if v, ok := s.guardMemo[site]; ok {
		return v
	}
	guarded := false
	for child, p := site, s.parent[site]; p != nil && !guarded; child, p = p, s.parent[p] {
		var list []ast.Stmt
		switch b := p.(type) {
		case *ast.FuncLit, *ast.FuncDecl:
			s.guardMemo[site] = false
			return false
		case *ast.BlockStmt:
			list = b.List
		case *ast.CaseClause:
			list = b.Body
		case *ast.CommClause:
			list = b.Body
		}
		for i, st := range list {
			if st == child {
				guarded = s.beginBefore(list[:i])
				break
			}
		}
	}
	s.guardMemo[site] = guarded
	return guarded
}

// beginBefore says whether the statements hold a begin call whose error is checked by a
// terminating if.
func (s *state) beginBefore(stmts []ast.Stmt) bool {
	for i, st := range stmts {
		if ifs, ok := st.(*ast.IfStmt); ok && ifs.Init != nil {
			if errObj := s.beginErr(ifs.Init); errObj != nil && s.errCheck(ifs, errObj) {
				return true
			}
		}
		errObj := s.beginErr(st)
		if errObj == nil {
			continue
		}
		for _, later := range stmts[i+1:] {
			if ifs, ok := later.(*ast.IfStmt); ok && ifs.Init == nil && s.errCheck(ifs, errObj) {
				return true
			}
		}
	}
	return false
}

// beginErr returns the error variable a statement assigns a begin wrapper's error to.
func (s *state) beginErr(st ast.Stmt) types.Object {
	as, ok := st.(*ast.AssignStmt)
	if !ok || len(as.Rhs) != 1 || len(as.Lhs) < 2 {
		return nil
	}
	call, ok := ast.Unparen(as.Rhs[0]).(*ast.CallExpr)
	if !ok {
		return nil
	}
	if w := s.wrapperOf(call); w == nil || w.Kind != "begin" {
		return nil
	}
	id, ok := as.Lhs[len(as.Lhs)-1].(*ast.Ident)
	if !ok || id.Name == "_" {
		return nil
	}
	return s.pass.TypesInfo.ObjectOf(id)
}

// errCheck says whether ifs is "if err != nil { ...; return/panic }" with no else.
func (s *state) errCheck(ifs *ast.IfStmt, errObj types.Object) bool {
	be, ok := ifs.Cond.(*ast.BinaryExpr)
	if !ok || be.Op != token.NEQ || ifs.Else != nil {
		return false
	}
	isErr := func(e ast.Expr) bool {
		id, ok := ast.Unparen(e).(*ast.Ident)
		return ok && s.pass.TypesInfo.ObjectOf(id) == errObj
	}
	isNil := func(e ast.Expr) bool {
		id, ok := ast.Unparen(e).(*ast.Ident)
		return ok && s.pass.TypesInfo.ObjectOf(id) == types.Universe.Lookup("nil")
	}
	if !(isErr(be.X) && isNil(be.Y) || isErr(be.Y) && isNil(be.X)) {
		return false
	}
	if len(ifs.Body.List) == 0 {
		return false
	}
	switch last := ifs.Body.List[len(ifs.Body.List)-1].(type) {
	case *ast.ReturnStmt:
		return true
	case *ast.ExprStmt:
		call, ok := last.X.(*ast.CallExpr)
		if !ok {
			return false
		}
		b, ok := typeutil.Callee(s.pass.TypesInfo, call).(*types.Builtin)
		return ok && b.Name() == "panic"
	}
	return false
}

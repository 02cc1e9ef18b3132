package scan

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ConfigFile is the name of the scan configuration file that the analyzer looks for, from the
// analysed package's directory up to its module root, when no -config flag names one.
const ConfigFile = "latch.scan.yaml"

// Config is a scan configuration: which calls are consequential, and which functions, besides
// the built-in ones, run their argument under latch.
type Config struct {
	// File is where the configuration was read from ("" for one built in Go).
	File string
	// Calls are the consequential APIs: a reference to one outside latch is a diagnostic.
	Calls []Rule
	// Wrappers are functions that run one of their arguments under latch, in addition to the
	// built-in ones: latch.Protect, Guard.Execute and Guard.Begin, the Go client's Protect and
	// Begin, latchriver.Wrap and latchasynq.Handler.
	Wrappers []Wrapper
	// Integrations turns on optional wrapper presets by name, "temporal" and
	// "asynq_middleware": registrations that are protection only when the program installs
	// latch's interceptor or middleware, which the scan cannot see (docs/scan.md).
	Integrations []string
}

// Rule names one consequential API.
type Rule struct {
	// Package is the import path of the package that declares the function or method.
	Package string
	// Func is "Name", "(Type).Name" or "(*Type).Name"; Name may hold path.Match wildcards.
	// A method is matched by the named type it is declared on, pointer or not, so
	// "(Client).Charge" and "(*Client).Charge" are the same pattern. Type may be an interface:
	// then calls through that interface match.
	Func string
	// Args, when set, narrows the rule to calls whose leading arguments are string constants
	// matching these patterns, position by position ("*" matches any argument, constant or
	// not). A call whose argument at a non-"*" position is not a constant does not match.
	Args []string
	// Hosts and Methods (net/http only) narrow the rule to requests whose URL host and method
	// are statically known and match: see docs/scan.md for how they are found.
	Hosts   []string
	Methods []string
	// Why is said in the diagnostic ("moves money").
	Why string

	recv string // the receiver's type name, "" for a function
	name string // the function's or method's name pattern
}

// Wrapper is a function that runs one of its arguments under latch.
type Wrapper struct {
	// Package and Func name the wrapper as a Rule does.
	Package string
	Func    string
	// Kind is "func" (the default: the argument at Arg runs under latch) or "begin" (the
	// wrapper reserves the action, as Guard.Begin does: the statements after it that follow a
	// check of its error run under latch).
	Kind string
	// Arg is the index, from 0 and not counting a method's receiver, of the argument that runs
	// under latch (Kind "func").
	Arg int
	// Method, when set, says that the argument is a value whose method of this name runs under
	// latch (river's Work, asynq's ProcessTask); "*" is every exported method (Temporal's
	// activity structs). Unset, the argument is a function.
	Method string

	recv, name string
}

// builtinWrappers are the wrappers every scan knows: latch's own and the river and asynq
// integrations', which run the given function or worker under latch wherever they are used.
var builtinWrappers = []Wrapper{
	{Package: "github.com/latchkit/latch", Func: "Protect", Arg: 2},
	{Package: "github.com/latchkit/latch", Func: "(*Guard).Execute", Arg: 2},
	{Package: "github.com/latchkit/latch", Func: "(*Guard).Begin", Kind: "begin"},
	{Package: "github.com/latchkit/latch/client", Func: "Protect", Arg: 2},
	{Package: "github.com/latchkit/latch/client", Func: "(*Client).Begin", Kind: "begin"},
	{Package: "github.com/latchkit/latch/integrations/river", Func: "Wrap", Arg: 2, Method: "Work"},
	{Package: "github.com/latchkit/latch/integrations/asynq", Func: "Handler", Arg: 2, Method: "ProcessTask"},
}

// optionalIntegrations are the wrapper presets a configuration turns on by name in
// "integrations:". Each treats a registration as protection, which holds only when the worker
// or mux carries latch's interceptor or middleware — the scan cannot see that, so the
// configuration says it.
var optionalIntegrations = map[string][]Wrapper{
	// Every activity of a worker built with latchtemporal.NewInterceptor runs under latch.
	"temporal": {
		{Package: "go.temporal.io/sdk/worker", Func: "(ActivityRegistry).RegisterActivity", Arg: 0, Method: "*"},
		{Package: "go.temporal.io/sdk/worker", Func: "(ActivityRegistry).RegisterActivityWithOptions", Arg: 0, Method: "*"},
	},
	// Every handler of a mux that uses latchasynq.Middleware runs under latch.
	"asynq_middleware": {
		{Package: "github.com/hibiken/asynq", Func: "(*ServeMux).HandleFunc", Arg: 1},
		{Package: "github.com/hibiken/asynq", Func: "(*ServeMux).Handle", Arg: 1, Method: "ProcessTask"},
	},
}

// ConfigError is a configuration that cannot be used: File:Line names where, Field the
// offending field ("calls[2].func").
type ConfigError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrNoConfig is returned by FindConfig when no configuration file is found.
var ErrNoConfig = errors.New("no scan configuration")

// LoadConfig reads and parses the configuration file at path.
func LoadConfig(file string) (*Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read scan configuration: %w", err)
	}
	return ParseConfig(file, data)
}

// FindConfig looks for ConfigFile in dir and its parents, stopping after the first directory
// that holds a go.mod (the module root). It returns ErrNoConfig when there is none.
func FindConfig(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("find scan configuration: %w", err)
	}
	for {
		p := filepath.Join(dir, ConfigFile)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("%w: no %s in the package's directory or above it up to its module root (name one with --config)", ErrNoConfig, ConfigFile)
}

// ParseConfig parses and validates a configuration document; file names it in errors. Every
// error is a *ConfigError.
func ParseConfig(file string, data []byte) (*Config, error) {
	if file == "" {
		file = ConfigFile
	}
	p := &cparser{file: file}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line := 0
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			// yaml.v3 messages start "yaml: line N: ..."; keep the words, the file leads.
			msg := strings.TrimPrefix(err.Error(), "yaml: ")
			if rest, ok := strings.CutPrefix(msg, "line "); ok {
				if n, after, ok := strings.Cut(rest, ": "); ok {
					if l, err := strconv.Atoi(n); err == nil {
						line, msg = l, after
					}
				}
			}
			return nil, &ConfigError{File: file, Line: line, Msg: "not YAML: " + msg}
		}
		return nil, &ConfigError{File: file, Msg: err.Error()}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &ConfigError{File: file, Line: 1, Msg: "empty document: want a mapping with version and calls"}
	}
	cfg, err := p.document(doc.Content[0])
	if err != nil {
		return nil, err
	}
	cfg.File = file
	return cfg, nil
}

type cparser struct{ file string }

func (p *cparser) errf(n *yaml.Node, field, format string, args ...any) *ConfigError {
	return &ConfigError{File: p.file, Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// mapping returns the key/value pairs of n, refusing keys not in known and duplicates.
func (p *cparser) mapping(n *yaml.Node, field string, known []string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, field, "want a mapping (%s)", strings.Join(known, ", "))
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		sub := name
		if field != "" {
			sub = field + "." + name
		}
		if k.Kind != yaml.ScalarNode || !slices.Contains(known, name) {
			return nil, p.errf(k, sub, "unknown field (known: %s)", strings.Join(known, ", "))
		}
		if _, dup := out[name]; dup {
			return nil, p.errf(k, sub, "given twice")
		}
		out[name] = v
	}
	return out, nil
}

func (p *cparser) str(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return "", p.errf(n, field, "want a string")
	}
	return n.Value, nil
}

func (p *cparser) strs(n *yaml.Node, field string) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, field, "want a list of strings")
	}
	out := make([]string, 0, len(n.Content))
	for i, e := range n.Content {
		s, err := p.str(e, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

var (
	topKeys     = []string{"version", "calls", "wrappers", "integrations"}
	ruleKeys    = []string{"package", "func", "args", "hosts", "methods", "why"}
	wrapperKeys = []string{"package", "func", "kind", "arg", "method"}
)

func (p *cparser) document(n *yaml.Node) (*Config, error) {
	m, err := p.mapping(n, "", topKeys)
	if err != nil {
		return nil, err
	}
	v, ok := m["version"]
	if !ok {
		return nil, p.errf(n, "version", "missing (want version: 1)")
	}
	if v.Kind != yaml.ScalarNode || v.Value != "1" {
		return nil, p.errf(v, "version", "unsupported version %q (want 1)", v.Value)
	}
	cfg := &Config{}
	calls, ok := m["calls"]
	if !ok {
		return nil, p.errf(n, "calls", "missing: list the consequential calls to look for")
	}
	if calls.Kind != yaml.SequenceNode || len(calls.Content) == 0 {
		return nil, p.errf(calls, "calls", "want a non-empty list of {package, func}")
	}
	for i, c := range calls.Content {
		r, err := p.rule(c, fmt.Sprintf("calls[%d]", i))
		if err != nil {
			return nil, err
		}
		cfg.Calls = append(cfg.Calls, r)
	}
	if ws, ok := m["wrappers"]; ok {
		if ws.Kind != yaml.SequenceNode {
			return nil, p.errf(ws, "wrappers", "want a list of {package, func, arg}")
		}
		for i, w := range ws.Content {
			wr, err := p.wrapper(w, fmt.Sprintf("wrappers[%d]", i))
			if err != nil {
				return nil, err
			}
			cfg.Wrappers = append(cfg.Wrappers, wr)
		}
	}
	if in, ok := m["integrations"]; ok {
		names, err := p.strs(in, "integrations")
		if err != nil {
			return nil, err
		}
		for i, name := range names {
			if _, ok := optionalIntegrations[name]; !ok {
				return nil, p.errf(in.Content[i], fmt.Sprintf("integrations[%d]", i), "unknown integration %q (known: asynq_middleware, temporal)", name)
			}
		}
		cfg.Integrations = names
	}
	return cfg, nil
}

func (p *cparser) rule(n *yaml.Node, field string) (Rule, error) {
	var r Rule
	m, err := p.mapping(n, field, ruleKeys)
	if err != nil {
		return r, err
	}
	if r.Package, r.Func, err = p.target(n, m, field); err != nil {
		return r, err
	}
	if r.recv, r.name, err = splitFunc(r.Func); err != nil {
		return r, p.errf(m["func"], field+".func", "%v", err)
	}
	if v, ok := m["args"]; ok {
		if r.Args, err = p.strs(v, field+".args"); err != nil {
			return r, err
		}
		for i, a := range r.Args {
			if _, err := path.Match(a, ""); err != nil {
				return r, p.errf(v.Content[i], fmt.Sprintf("%s.args[%d]", field, i), "bad pattern %q: %v", a, err)
			}
		}
	}
	for _, k := range []string{"hosts", "methods"} {
		v, ok := m[k]
		if !ok {
			continue
		}
		if r.Package != "net/http" {
			return r, p.errf(v, field+"."+k, "only for package net/http (this rule is for %s)", r.Package)
		}
		list, err := p.strs(v, field+"."+k)
		if err != nil {
			return r, err
		}
		if len(list) == 0 {
			return r, p.errf(v, field+"."+k, "empty list: leave the field out to match every %s", strings.TrimSuffix(k, "s"))
		}
		for i, s := range list {
			if _, err := path.Match(s, ""); err != nil {
				return r, p.errf(v.Content[i], fmt.Sprintf("%s.%s[%d]", field, k, i), "bad pattern %q: %v", s, err)
			}
		}
		if k == "hosts" {
			r.Hosts = list
		} else {
			for i := range list {
				list[i] = strings.ToUpper(list[i])
			}
			r.Methods = list
		}
	}
	if v, ok := m["why"]; ok {
		if r.Why, err = p.str(v, field+".why"); err != nil {
			return r, err
		}
	}
	return r, nil
}

func (p *cparser) wrapper(n *yaml.Node, field string) (Wrapper, error) {
	var w Wrapper
	m, err := p.mapping(n, field, wrapperKeys)
	if err != nil {
		return w, err
	}
	if w.Package, w.Func, err = p.target(n, m, field); err != nil {
		return w, err
	}
	if w.recv, w.name, err = splitFunc(w.Func); err != nil {
		return w, p.errf(m["func"], field+".func", "%v", err)
	}
	w.Kind = "func"
	if v, ok := m["kind"]; ok {
		if w.Kind, err = p.str(v, field+".kind"); err != nil {
			return w, err
		}
		if w.Kind != "func" && w.Kind != "begin" {
			return w, p.errf(v, field+".kind", "unknown kind %q (want func or begin)", w.Kind)
		}
	}
	v, hasArg := m["arg"]
	switch {
	case w.Kind == "begin" && hasArg:
		return w, p.errf(v, field+".arg", "not for kind begin: a begin wrapper protects the statements after it")
	case w.Kind == "func" && !hasArg:
		return w, p.errf(n, field+".arg", "missing: the index of the argument that runs under latch")
	case hasArg:
		a, err := strconv.Atoi(v.Value)
		if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || err != nil || a < 0 {
			return w, p.errf(v, field+".arg", "want an argument index, 0 or more")
		}
		w.Arg = a
	}
	if v, ok := m["method"]; ok {
		if w.Kind == "begin" {
			return w, p.errf(v, field+".method", "not for kind begin")
		}
		if w.Method, err = p.str(v, field+".method"); err != nil {
			return w, err
		}
		if w.Method != "*" && !isIdent(w.Method) {
			return w, p.errf(v, field+".method", "want a method name or *")
		}
	}
	return w, nil
}

// target reads the package and func fields every rule and wrapper has.
func (p *cparser) target(n *yaml.Node, m map[string]*yaml.Node, field string) (pkg, fn string, err error) {
	for _, k := range []string{"package", "func"} {
		v, ok := m[k]
		if !ok {
			return "", "", p.errf(n, field+"."+k, "missing")
		}
		s, err := p.str(v, field+"."+k)
		if err != nil {
			return "", "", err
		}
		if s == "" {
			return "", "", p.errf(v, field+"."+k, "empty")
		}
		if k == "package" {
			if strings.ContainsAny(s, " \t()*") {
				return "", "", p.errf(v, field+".package", "want an import path, got %q", s)
			}
			pkg = s
		} else {
			fn = s
		}
	}
	return pkg, fn, nil
}

// splitFunc splits "Name", "(Type).Name" or "(*Type).Name" into the receiver type's name ("" for
// a function) and the name pattern.
func splitFunc(s string) (recv, name string, err error) {
	name = s
	if strings.HasPrefix(s, "(") {
		r, rest, ok := strings.Cut(s[1:], ")")
		if !ok || !strings.HasPrefix(rest, ".") {
			return "", "", fmt.Errorf("want Name, (Type).Name or (*Type).Name, got %q", s)
		}
		recv = strings.TrimPrefix(r, "*")
		if !isIdent(recv) {
			return "", "", fmt.Errorf("receiver %q is not a type name", r)
		}
		name = rest[1:]
	}
	if name == "" || strings.ContainsAny(name, "(). \t") {
		return "", "", fmt.Errorf("want Name, (Type).Name or (*Type).Name, got %q", s)
	}
	if _, err := path.Match(name, ""); err != nil {
		return "", "", fmt.Errorf("bad name pattern %q: %v", name, err)
	}
	return recv, name, nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		ok := r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || (i > 0 && '0' <= r && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// wrappers returns the built-in wrappers, those of the configured integrations and the
// configured ones, parsed.
func (c *Config) wrappers() []Wrapper {
	var out []Wrapper
	add := func(ws []Wrapper) {
		for _, w := range ws {
			if w.Kind == "" {
				w.Kind = "func"
			}
			if w.name == "" {
				w.recv, w.name, _ = splitFunc(w.Func)
			}
			out = append(out, w)
		}
	}
	add(builtinWrappers)
	for _, name := range c.Integrations {
		add(optionalIntegrations[name])
	}
	add(c.Wrappers)
	return out
}

// Validate checks a configuration built in Go as ParseConfig checks a file (without lines).
// The analyzer validates its configuration before each package.
func (c *Config) Validate() error {
	_, err := c.rules()
	return err
}

// rules returns the configured rules with their patterns split (a Config built in Go has not
// been through ParseConfig), refusing what ParseConfig would.
func (c *Config) rules() ([]Rule, error) {
	for i, name := range c.Integrations {
		if _, ok := optionalIntegrations[name]; !ok {
			return nil, fmt.Errorf("integrations[%d]: unknown integration %q (known: asynq_middleware, temporal)", i, name)
		}
	}
	for i, w := range c.Wrappers {
		if _, _, err := splitFunc(w.Func); err != nil {
			return nil, fmt.Errorf("wrappers[%d].func: %w", i, err)
		}
		if w.Kind != "" && w.Kind != "func" && w.Kind != "begin" {
			return nil, fmt.Errorf("wrappers[%d].kind: unknown kind %q (want func or begin)", i, w.Kind)
		}
	}
	out := make([]Rule, 0, len(c.Calls))
	for i, r := range c.Calls {
		if r.name == "" {
			recv, name, err := splitFunc(r.Func)
			if err != nil {
				return nil, fmt.Errorf("calls[%d].func: %w", i, err)
			}
			r.recv, r.name = recv, name
		}
		if (len(r.Hosts) > 0 || len(r.Methods) > 0) && r.Package != "net/http" {
			field := "hosts"
			if len(r.Hosts) == 0 {
				field = "methods"
			}
			return nil, fmt.Errorf("calls[%d].%s: only for package net/http (this rule is for %s)", i, field, r.Package)
		}
		methods := make([]string, len(r.Methods))
		for j, m := range r.Methods {
			methods[j] = strings.ToUpper(m)
		}
		r.Methods = methods
		out = append(out, r)
	}
	return out, nil
}

package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Keys of a budget mapping, in the order error messages list them: a grant's budget has no per
// (its holders share it), an action's own budget must have one.
var (
	grantBudgetKeys  = []string{"metric", "limit", "window"}
	actionBudgetKeys = []string{"metric", "limit", "window", "per"}
)

// Bounds of a budget's window. A window shorter than a second cannot be told apart from the
// clocks of two hosts; one longer than a century is "for ever", which a limit with no budget
// window does not need.
const (
	MinBudgetWindow = time.Second
	MaxBudgetWindow = MaxDays * 24 * time.Hour
)

// ParseISODuration reads an ISO 8601 duration of fixed length: P, then optional weeks (W) and
// days (D), then optionally T and hours (H), minutes (M) and seconds (S), each a whole number,
// at least one of them present ("P1D", "PT24H", "P30D", "PT15M", "P1DT12H", "P2W"). A day is 24
// hours and a week 7 days: a budget's window is rolling, not a calendar period. Years and months,
// whose length varies, and fractions are refused, as is anything longer than MaxBudgetWindow.
// Bounds such as "positive" are the caller's.
func ParseISODuration(s string) (time.Duration, error) {
	rest, ok := strings.CutPrefix(s, "P")
	if !ok {
		return 0, errors.New("an ISO 8601 duration starts with P")
	}
	if rest == "" {
		return 0, errors.New("no amount after P (expected P1D, PT1H, …)")
	}
	var total time.Duration
	timePart, units := false, 0
	order := "WD"
	for rest != "" {
		if rest[0] == 'T' {
			if timePart {
				return 0, errors.New("a second T")
			}
			timePart, order, rest = true, "HMS", rest[1:]
			if rest == "" {
				return 0, errors.New("no hours, minutes or seconds after T")
			}
			continue
		}
		i := 0
		for i < len(rest) && '0' <= rest[i] && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, fmt.Errorf("expected a number at %q", rest)
		}
		if i == len(rest) {
			return 0, fmt.Errorf("number %s has no unit", rest)
		}
		unit := rest[i]
		if unit == '.' || unit == ',' {
			return 0, errors.New("fractions are not allowed (write a smaller unit: PT90M, not PT1.5H)")
		}
		if !timePart && (unit == 'Y' || unit == 'M') {
			return 0, errors.New("years and months have no fixed length (write days: P30D, P365D)")
		}
		at := strings.IndexByte(order, unit)
		if at < 0 {
			if !timePart && strings.IndexByte("HS", unit) >= 0 {
				return 0, fmt.Errorf("unit %c needs a T before it (PT%s%c)", unit, rest[:i], unit)
			}
			return 0, fmt.Errorf("unit %c is not expected here (units are W and D, then T and H, M and S, in that order)", unit)
		}
		// Bounded by the unit, before multiplying: P870000D would otherwise wrap around.
		u := isoUnit(unit, timePart)
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil || n > int64(MaxBudgetWindow/u) {
			return 0, fmt.Errorf("%s%c is longer than %d days", rest[:i], unit, MaxDays)
		}
		total += time.Duration(n) * u
		if total > MaxBudgetWindow {
			return 0, fmt.Errorf("longer than %d days", MaxDays)
		}
		order = order[at+1:]
		rest = rest[i+1:]
		units++
	}
	if units == 0 {
		return 0, errors.New("no amount")
	}
	return total, nil
}

func isoUnit(unit byte, timePart bool) time.Duration {
	switch {
	case unit == 'W':
		return 7 * 24 * time.Hour
	case unit == 'D':
		return 24 * time.Hour
	case unit == 'H':
		return time.Hour
	case unit == 'M' && timePart:
		return time.Minute
	}
	return time.Second
}

// FormatISODuration writes d as the shortest ISO 8601 duration ParseISODuration reads back to
// d, in days, hours, minutes and seconds ("P1D", "PT1H", "P1DT12H", "PT90S" is "PT1M30S"); a
// fraction of a second is written as a decimal second ("PT0.5S"). Receipts, refusals and the
// policy hash write windows this way, so PT24H and P1D are the same window everywhere.
func FormatISODuration(d time.Duration) string {
	if d <= 0 {
		return "PT0S"
	}
	var b strings.Builder
	b.WriteByte('P')
	day := 24 * time.Hour
	if n := d / day; n > 0 {
		b.WriteString(strconv.FormatInt(int64(n), 10) + "D")
		d -= n * day
	}
	if d == 0 {
		return b.String()
	}
	b.WriteByte('T')
	if n := d / time.Hour; n > 0 {
		b.WriteString(strconv.FormatInt(int64(n), 10) + "H")
		d -= n * time.Hour
	}
	if n := d / time.Minute; n > 0 {
		b.WriteString(strconv.FormatInt(int64(n), 10) + "M")
		d -= n * time.Minute
	}
	if d > 0 {
		if d%time.Second == 0 {
			b.WriteString(strconv.FormatInt(int64(d/time.Second), 10) + "S")
		} else {
			b.WriteString(strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S")
		}
	}
	return b.String()
}

// CheckBudget reports what is wrong with a budget built in code, as the loader would have
// refused it: an empty or path-like metric, a negative limit, a window outside
// MinBudgetWindow…MaxBudgetWindow, or a per that is not agent, user or principal (or "", on a
// grant's budget: forAction says which).
func CheckBudget(b Budget, forAction bool) error {
	switch {
	case b.Metric == "":
		return errors.New("no metric (expected count or an integer argument's name)")
	case b.Metric != BudgetCount && checkArgName(b.Metric) != "":
		return errors.New(checkArgName(b.Metric))
	case b.Limit < 0:
		return fmt.Errorf("limit %d is negative (expected 0 or more)", b.Limit)
	case b.Window < MinBudgetWindow || b.Window > MaxBudgetWindow:
		return fmt.Errorf("window %s is outside PT1S…P%dD", FormatISODuration(b.Window), MaxDays)
	case !forAction && b.Per != "":
		return fmt.Errorf("per %s on a grant's budget (a grant's budget is shared by its holders; per is for an action's own budget)", quote(b.Per))
	case forAction && !validPer(b.Per):
		return fmt.Errorf("per %s (expected agent, user or principal)", quote(b.Per))
	}
	return nil
}

func validPer(s string) bool {
	return s == BudgetPerAgent || s == BudgetPerUser || s == BudgetPerPrincipal
}

// budgets parses a `budgets:` list: of a grant when action is nil, else of that action's own.
// where names the owner in messages.
func (p *parser) budgets(e entry, where string, forAction bool) ([]Budget, *Error) {
	if e.v.Kind != yaml.SequenceNode {
		return nil, p.errf(at(e), "budgets %s is %s (expected a list of {metric, limit, window%s})", where, describeNode(e.v), pick(forAction, ", per", ""))
	}
	if len(e.v.Content) == 0 {
		return nil, p.errf(e.v, "empty budgets %s (expected at least one budget; leave budgets out for none)", where)
	}
	out := make([]Budget, 0, len(e.v.Content))
	first := map[string]*yaml.Node{}
	for i, bn := range e.v.Content {
		b, e := p.budget(bn, fmt.Sprintf("budget %d %s", i, where), forAction)
		if e != nil {
			return nil, e
		}
		// Two budgets on one metric over different windows are a rate and a total (10 an
		// hour, 100 a day), both checked; over the same window, one of them says nothing the
		// other does not, and a reader can miss which holds: write the stricter one.
		k := b.Metric + "\x00" + b.Per + "\x00" + b.Window.String()
		if f := first[k]; f != nil {
			what := "metric " + quote(b.Metric)
			if forAction {
				what += " per " + b.Per
			}
			return nil, p.errf(bn, "budget %d %s is a second budget on %s over window %s (first at line %d, column %d; keep the stricter one)",
				i, where, what, FormatISODuration(b.Window), f.Line, f.Column)
		}
		first[k] = bn
		out = append(out, b)
	}
	return out, nil
}

// budget parses one budget mapping. what names it in messages ("budget 0 in grant "ops"").
func (p *parser) budget(n *yaml.Node, what string, forAction bool) (Budget, *Error) {
	b := Budget{Pos: posOf(n)}
	keys := grantBudgetKeys
	if forAction {
		keys = actionBudgetKeys
	}
	if n.Kind != yaml.MappingNode {
		return b, p.errf(n, "%s is %s (expected a mapping with %s)", what, describeNode(n), strings.Join(keys, ", "))
	}
	var hasMetric, hasLimit, hasWindow, hasPer bool
	for _, en := range entries(n) {
		var err *Error
		switch en.k.Value {
		case "metric":
			hasMetric = true
			b.Metric, err = p.budgetMetric(en, what)
		case "limit":
			hasLimit = true
			b.Limit, err = p.budgetLimit(en, what)
		case "window":
			hasWindow = true
			b.Window, err = p.budgetWindow(en, what)
		case "per":
			if !forAction {
				err = p.errf(en.k, "per in %s (a grant's budget is shared by everyone the grant covers; per is for an action's own budget)", what)
				break
			}
			hasPer = true
			var s string
			if s, err = p.str(en, "per of "+what); err == nil && !validPer(s) {
				err = p.errf(en.v, "bad per %s in %s (expected agent, user or principal)", quote(s), what)
			}
			b.Per = s
		default:
			err = p.unknownKey(en.k, "in "+what, keys)
		}
		if err != nil {
			return b, err
		}
	}
	switch {
	case !hasMetric:
		return b, p.errf(n, "missing metric in %s (expected count or the name of an integer argument)", what)
	case !hasLimit:
		return b, p.errf(n, "missing limit in %s (expected a non-negative integer)", what)
	case !hasWindow:
		return b, p.errf(n, "missing window in %s (expected an ISO 8601 duration such as P1D or PT1H)", what)
	case forAction && !hasPer:
		return b, p.errf(n, "missing per in %s (expected agent, user or principal: whose calls share the budget)", what)
	}
	return b, nil
}

func (p *parser) budgetMetric(e entry, what string) (string, *Error) {
	s, err := p.str(e, "metric of "+what)
	if err != nil {
		return "", err
	}
	if s != BudgetCount {
		if msg := checkArgName(s); msg != "" {
			return "", p.errf(e.v, "bad metric %s in %s: %s (expected count or an integer argument's name)", quote(s), what, msg)
		}
	}
	return s, nil
}

// budgetLimit reads a limit: a non-negative integer. Floats never reach here (check refuses
// them, naming the limit); a decimal string is refused as not a count.
func (p *parser) budgetLimit(e entry, what string) (int64, *Error) {
	n := e.v
	if n.Kind != yaml.ScalarNode || n.Tag != tagInt {
		hint := ""
		if n.Kind == yaml.ScalarNode && n.Tag == tagStr {
			hint = "; a string is never read as a number"
		}
		return 0, p.errf(at(e), "limit of %s is %s (expected a non-negative integer%s)", what, describeNode(n), hint)
	}
	v, _ := parseSafeInt(n.Value) // checked by check
	if v < 0 {
		return 0, p.errf(n, "limit of %s is %d (expected 0 or more)", what, v)
	}
	return v, nil
}

func (p *parser) budgetWindow(e entry, what string) (time.Duration, *Error) {
	const expected = "expected an ISO 8601 duration such as PT15M, PT24H, P1D or P30D"
	if e.v.Kind == yaml.ScalarNode && e.v.Tag == tagInt {
		return 0, p.errf(e.v, "window of %s is a bare number %s (%s)", what, e.v.Value, expected)
	}
	s, err := p.str(e, "window of "+what)
	if err != nil {
		return 0, err
	}
	d, perr := ParseISODuration(s)
	if perr != nil {
		return 0, p.errf(e.v, "bad window %s in %s: %v (%s)", quote(s), what, perr, expected)
	}
	if d < MinBudgetWindow {
		return 0, p.errf(e.v, "window %s in %s is %s (expected at least PT1S: a budget's window must be positive)", quote(s), what, pick(d == 0, "zero", "shorter than a second"))
	}
	return d, nil
}

// isBudgetLimit reports whether path (as check builds it) names the limit of a budget, so
// that a float there is refused as a limit rather than as money.
func isBudgetLimit(path string) bool {
	rest, ok := strings.CutSuffix(path, "].limit")
	if !ok {
		return false
	}
	i := strings.LastIndex(rest, "budgets[")
	if i < 0 || i > 0 && rest[i-1] != '.' {
		return false
	}
	_, err := strconv.Atoi(rest[i+len("budgets["):])
	return err == nil
}

// checkActionBudgets refuses an action's own budgets that cannot be charged: with no effect
// template (a budget is charged with the reservation of an effect key, so an unkeyed call could
// never be charged), or, when the action declares its arguments, metered by an argument that is
// not a declared integer.
func (p *parser) checkActionBudgets(a *Action) *Error {
	if len(a.Budgets) == 0 {
		return nil
	}
	errAt := func(pos Position, format string, args ...any) *Error {
		return &Error{File: p.file, Line: max(pos.Line, 1), Column: pos.Column, Msg: fmt.Sprintf(format, args...)}
	}
	if a.Effect == nil {
		return errAt(a.Budgets[0].Pos, "action %s has budgets but no effect template (a budget is charged when the call reserves its effect key; add effect:)", quote(a.Name))
	}
	if a.Arguments == nil {
		return nil
	}
	for i, b := range a.Budgets {
		if b.Metric == BudgetCount {
			continue
		}
		d := a.Argument(b.Metric)
		switch {
		case d == nil:
			return errAt(b.Pos, "budget %d in action %s meters argument %s, which arguments: does not declare (expected count or a declared integer argument)", i, quote(a.Name), quote(b.Metric))
		case d.Type != TypeInteger:
			return errAt(b.Pos, "budget %d in action %s meters argument %s, declared %s (expected count or a declared integer argument)", i, quote(a.Name), quote(b.Metric), d.Type)
		case d.Redact != RedactNone:
			// A charge is recorded in receipts and shown with the budget: the value in full.
			return errAt(b.Pos, "budget %d in action %s meters argument %s, declared redact (each charge records the value in full)", i, quote(a.Name), quote(b.Metric))
		}
	}
	return nil
}

// normalizeBudgets is a budgets list's part of the policy hash: windows in ISO 8601 as
// FormatISODuration writes them, so that PT24H and P1D hash alike.
func normalizeBudgets(bs []Budget) []any {
	out := make([]any, len(bs))
	for i, b := range bs {
		m := map[string]any{"metric": b.Metric, "limit": b.Limit, "window": FormatISODuration(b.Window)}
		if b.Per != "" {
			m["per"] = b.Per
		}
		out[i] = m
	}
	return out
}

// budgetWarnings lists, for every grant with budgets, the listed actions it covers whose calls
// it would refuse every time: no effect template, or a metric the action's declared arguments
// cannot supply as an integer.
func budgetWarnings(p *Policy) []Warning {
	if p.Authority == nil {
		return nil
	}
	var ws []Warning
	for _, g := range p.Authority.Grants {
		if g == nil || len(g.Budgets) == 0 {
			continue
		}
		for name, a := range p.Actions {
			if !matchesAny(g.Actions, name) {
				continue
			}
			if a.Effect == nil && !p.ReadOnlyTool(name) {
				ws = append(ws, Warning{Code: WarnBudgetNoEffect, Action: name, Pos: g.Budgets[0].Pos,
					Msg: "grant " + quote(g.ID) + " has budgets and covers action " + quote(name) + ", which has no effect template:" +
						" every call to it under this grant is refused budget_needs_effect_key (a budget is charged when an effect key is reserved)"})
			}
			if a.Arguments == nil {
				continue
			}
			for _, b := range g.Budgets {
				if b.Metric == BudgetCount {
					continue
				}
				if d := a.Argument(b.Metric); d == nil || d.Type != TypeInteger {
					ws = append(ws, Warning{Code: WarnBudgetMetric, Action: name, Pos: b.Pos,
						Msg: "grant " + quote(g.ID) + " meters " + quote(b.Metric) + ", which action " + quote(name) +
							" does not declare as an integer argument: every call to it under this grant is refused"})
				}
			}
		}
	}
	return ws
}

// matchesAny reports whether an action name matches one of a grant's action patterns
// ('.'-separated: a literal segment, a prefix ending in *, or a final ** for one or more
// segments).
func matchesAny(patterns []string, name string) bool {
	for _, pat := range patterns {
		if matchPattern(pat, name) {
			return true
		}
	}
	return false
}

func matchPattern(pat, name string) bool {
	ps, ns := strings.Split(pat, "."), strings.Split(name, ".")
	if last := len(ps) - 1; ps[last] == "**" {
		if len(ns) <= last {
			return false
		}
		ps, ns = ps[:last], ns[:last]
	} else if len(ps) != len(ns) {
		return false
	}
	for i := range ps {
		if prefix, wild := strings.CutSuffix(ps[i], "*"); wild {
			if !strings.HasPrefix(ns[i], prefix) {
				return false
			}
		} else if ps[i] != ns[i] {
			return false
		}
	}
	return true
}

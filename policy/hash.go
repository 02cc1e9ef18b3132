package policy

import (
	"time"

	"github.com/latchkit/latch/canon"
)

// hashPolicy returns "sha256:…" of the canonical JSON of the normalized document.
func hashPolicy(p *Policy) (string, error) {
	b, err := canon.Marshal(Normalize(p))
	if err != nil {
		return "", err
	}
	return canon.Sum(b), nil
}

// Normalize returns the value the policy hash is computed over (docs/policy.md), in canon's value
// model: every key present with defaults filled in and null for what is absent; templates as
// their source text; durations as Go's Duration.String ("5m0s"); expires_at as RFC 3339 in UTC.
// version and positions are not part of it. Two documents that parse to the same Normalize
// value are the same policy.
func Normalize(p *Policy) map[string]any {
	actions := make(map[string]any, len(p.Actions))
	for name, a := range p.Actions {
		actions[name] = normalizeAction(a)
	}
	var env any
	if p.Environment != "" {
		env = p.Environment
	}
	mode := p.Mode
	if mode == "" {
		mode = ModeEnforce
	}
	var auth any
	if p.Authority != nil {
		auth = normalizeAuthority(p.Authority)
	}
	n := map[string]any{
		"schema":      p.Schema,
		"mode":        string(mode),
		"environment": env,
		"actions":     actions,
		"authority":   auth,
	}
	// Present only when the document has one, so the hash of every policy without a gateway
	// section is what it was before the section existed.
	if p.Gateway != nil {
		n["gateway"] = normalizeGateway(p.Gateway)
	}
	if p.Approvers != nil {
		n["approvers"] = normalizeApprovers(p.Approvers)
	}
	if p.Retention != nil {
		n["retention"] = normalizeRetention(p.Retention)
	}
	if p.Scopes != nil {
		n["scopes"] = normalizeScopes(p.Scopes)
	}
	return n
}

func normalizeAction(a *Action) map[string]any {
	var rules any
	if len(a.Rules) > 0 {
		l := make([]any, len(a.Rules))
		for i, r := range a.Rules {
			l[i] = map[string]any{"when": normalizeConditions(r.When), "decision": string(r.Decision)}
		}
		rules = l
	}
	var decision any
	if a.Decision != "" {
		decision = string(a.Decision)
	}
	var maxAttempts any
	if a.MaxAttempts != 0 {
		maxAttempts = int64(a.MaxAttempts)
	}
	m := map[string]any{
		"effect":       templateSource(a.Effect),
		"resource":     templateSource(a.Resource),
		"lease":        durationString(a.Lease),
		"approval_ttl": durationString(a.ApprovalTTL),
		"max_attempts": maxAttempts,
		"decision":     decision,
		"rules":        rules,
	}
	if a.Approvers != nil {
		// Only when declared, so that a policy without approvers hashes as it always has.
		m["approvers"] = normalizeApproverRule(a.Approvers)
	}
	if a.Arguments != nil {
		// Only when declared, so that a policy without arguments: hashes as it always has.
		m["arguments"] = normalizeArguments(a)
	}
	if a.Budgets != nil {
		// Only when declared, so that a policy without budgets hashes as it always has.
		m["budgets"] = normalizeBudgets(a.Budgets)
	}
	if c := a.Precondition; c != nil {
		// Only when declared, so that a policy without preconditions hashes as it always has.
		m["precondition"] = map[string]any{"url": c.URL, "recheck": string(c.Recheck), "timeout": durationString(c.Timeout)}
	}
	return m
}

// normalizeArguments is the arguments section as a policy document would spell it, with
// absent bounds left out and additional always written. Display hints are presentation, like
// version: they are not part of the hash.
func normalizeArguments(a *Action) map[string]any {
	m := make(map[string]any, len(a.Arguments)+1)
	for _, d := range a.Arguments {
		decl := map[string]any{"type": string(d.Type), "optional": d.Optional}
		if d.Min != nil {
			decl["min"] = *d.Min
		}
		if d.Max != nil {
			decl["max"] = *d.Max
		}
		if d.MaxLength > 0 {
			decl["max_length"] = int64(d.MaxLength)
		}
		if d.Enum != nil {
			decl["enum"] = stringList(d.Enum)
		}
		if ed := d.Editable; ed != nil {
			// What an approver may change is part of what the policy allows.
			e := map[string]any{"decrease": ed.Decrease}
			if ed.Min != nil {
				e["min"] = *ed.Min
			}
			decl["editable"] = e
		}
		if d.Redact != RedactNone {
			// Only when set, so that a policy without redaction hashes as it always has:
			// redaction changes what receipts record of a call.
			decl["redact"] = string(d.Redact)
		}
		m[d.Name] = decl
	}
	m["additional"] = !a.RefuseAdditional
	return m
}

func templateSource(t *Template) any {
	if t == nil {
		return nil
	}
	return t.src
}

func durationString(d time.Duration) any {
	if d == 0 {
		return nil
	}
	return d.String()
}

func normalizeConditions(c Conditions) any {
	if len(c) == 0 {
		return nil
	}
	m := make(map[string]any, len(c))
	for _, cond := range c {
		key := cond.Key
		if key == "" {
			key = cond.Arg + "_" + string(cond.Op)
		}
		m[key] = cond.Operand
	}
	return m
}

func normalizeAuthority(au *Authority) map[string]any {
	grants := make([]any, len(au.Grants))
	for i, g := range au.Grants {
		grants[i] = normalizeGrant(g)
	}
	m := map[string]any{
		"max_delegation_depth": int64(au.MaxDelegationDepth),
		"grants":               grants,
	}
	if au.BreakGlass != nil {
		// Only when declared, so that a policy without envelopes hashes as it always has.
		m["break_glass"] = normalizeEnvelopes(au.BreakGlass)
	}
	return m
}

// normalizeGrant is one grant as the hash sees it: a policy grant, or an envelope's shape.
func normalizeGrant(g *Grant) map[string]any {
	var expires any
	if !g.ExpiresAt.IsZero() {
		expires = g.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	ng := map[string]any{
		"id":           g.ID,
		"subject":      map[string]any{"agent": orNull(g.Subject.Agent), "user": orNull(g.Subject.User)},
		"actions":      stringList(g.Actions),
		"resources":    stringList(g.Resources),
		"constraints":  normalizeConditions(g.Constraints),
		"environments": stringList(g.Environments),
		"expires_at":   expires,
		"delegable":    g.Delegable,
	}
	if g.Tasks != nil {
		// Only when declared, so that a grant without tasks hashes as it always has.
		ng["tasks"] = stringList(g.Tasks)
	}
	if g.Budgets != nil {
		// Only when declared, so that a grant without budgets hashes as it always has.
		ng["budgets"] = normalizeBudgets(g.Budgets)
	}
	return ng
}

func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func stringList(l []string) any {
	if l == nil {
		return nil
	}
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

package cli

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/latchkit/latch/identity"
)

// jwtPeople are the marks that tell a person's JWT from an agent's (identity.Config's approver
// marks). Without one every JWT is an agent's: it proposes, and never answers or resolves.
type jwtPeople struct {
	claim     string // CLAIM=VALUE
	audience  string
	nameClaim string
}

func (p *jwtPeople) register(f *pflag.FlagSet) {
	f.StringVar(&p.claim, "jwt-approver-claim", "", "a JWT whose claim CLAIM is VALUE (or a list holding it) is a person's, an approver's: it answers and resolves and never proposes (`CLAIM=VALUE`, e.g. latch_role=approver)")
	f.StringVar(&p.audience, "jwt-approver-audience", "", "a JWT whose aud holds `AUD` (instead of --jwt-audience) is a person's, an approver's")
	f.StringVar(&p.nameClaim, "jwt-approver-name-claim", "", "the claim naming the person of a person's JWT (default sub)")
}

func (p *jwtPeople) given() bool { return p.claim != "" || p.audience != "" || p.nameClaim != "" }

// marked reports whether a mark is given: whether any JWT can be a person's.
func (p *jwtPeople) marked() bool { return p.claim != "" || p.audience != "" }

func (p *jwtPeople) check() error {
	if p.claim != "" {
		k, v, ok := strings.Cut(p.claim, "=")
		if !ok || strings.TrimSpace(k) == "" || v == "" {
			return usagef("--jwt-approver-claim %q: want CLAIM=VALUE, such as latch_role=approver", p.claim)
		}
	}
	if p.nameClaim != "" && !p.marked() {
		return usagef("--jwt-approver-name-claim goes with --jwt-approver-claim or --jwt-approver-audience")
	}
	return nil
}

func (p *jwtPeople) apply(c *identity.Config) {
	if k, v, ok := strings.Cut(p.claim, "="); ok {
		c.ApproverClaim, c.ApproverValue = strings.TrimSpace(k), v
	}
	c.ApproverAudience = p.audience
	c.ApproverNameClaim = p.nameClaim
}

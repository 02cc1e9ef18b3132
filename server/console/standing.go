package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// standingView is one standing approval as the Standing page draws it.
type standingView struct {
	jsonview.Standing
	Principal string // who it admits, in words
	Bounds    string // its argument bounds, in words; every other argument is the request's
	Arguments string // the request's arguments, as hashed
	Active    bool
}

type standingData struct {
	base
	Standing []standingView
	State    string
	LastID   int64
}

// standingPage is GET /standing[?state=]: the standing approvals (operator.Standings, active
// by default), each with what it admits and, while active, the form that revokes it.
func (cs *Console) standingPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	cs.drawStanding(w, r, v, http.StatusOK, "")
}

func (cs *Console) drawStanding(w http.ResponseWriter, r *http.Request, v *viewer, status int, msg string) {
	state := r.URL.Query().Get("state")
	if state == "" {
		state = store.StandingActive
	}
	list, err := cs.op.Standings(r.Context(), state)
	if err != nil {
		cs.fail(w, r, v, http.StatusBadRequest, "The standing approvals could not be read: "+err.Error())
		return
	}
	data := &standingData{base: cs.pageBase(w, r, v, "Standing approvals", "standing", nil), State: state, LastID: cs.lastEvent(r)}
	data.Error = msg
	for _, s := range list {
		who := deref(s.Principal.Agent)
		if u := deref(s.Principal.User); u != "" {
			who += " for " + u
		}
		data.Standing = append(data.Standing, standingView{Standing: s, Principal: who, Bounds: boundsWords(s.Terms),
			Arguments: string(s.Arguments), Active: s.State == store.StandingActive})
	}
	cs.render(w, status, "standing", data)
}

// boundsWords is a standing approval's bounds in words: "amount ≤ 500, order_id any, total
// amount ≤ 2000".
func boundsWords(t jsonview.StandingTerms) string {
	if b := (store.StandingTerms{Max: t.Max, Vary: t.Vary, Total: t.Total}).Bounds(); b != "" {
		return b
	}
	return "none: every argument is the request's"
}

// revokeStanding is POST /standing/{id}/revoke: the logged-in person revokes the standing
// approval through Guard.RevokeStanding, which decides who may.
func (cs *Console) revokeStanding(w http.ResponseWriter, r *http.Request, v *viewer) {
	id := r.PathValue("id")
	note := strings.TrimSpace(r.PostForm.Get("note"))
	s, err := cs.g.RevokeStanding(r.Context(), &store.RevokeStandingRequest{ID: id, By: v.Name, Note: note})
	var se *store.StandingError
	switch {
	case errors.Is(err, store.ErrNotFound):
		cs.fail(w, r, v, http.StatusNotFound, "There is no standing approval "+id+".")
		return
	case errors.As(err, &se):
		cs.drawStanding(w, r, v, jsonview.StandingStatus(se.Reason), "Refused ("+se.Reason+"): "+se.Detail+". Nothing was changed.")
		return
	case err != nil:
		cs.fail(w, r, v, http.StatusServiceUnavailable, "The revocation was not recorded: "+err.Error())
		return
	}
	cs.flash(w, v, fmt.Sprintf("Revoked %s (%s) as %s after %d of %d uses.", s.ID, s.ActionName, v.Name, s.Uses, s.Terms.Uses))
	http.Redirect(w, r, "/standing", http.StatusSeeOther)
}

// standingOffer is the "Approve and grant a standing approval" part of a request's answer form:
// what the policy allows (docs/approvals.md#standing-approvals) and one row per argument of the
// request. Prefilled with the terms an earlier grant stated, since every grant counted must
// state the same terms.
type standingOffer struct {
	MaxUses int
	MaxFor  string // the policy's max_for, short ("2h")
	Args    []standingArg
	// Uses, For, TotalArg and TotalLimit prefill the form ("" or 0 when nobody stated terms).
	Uses       int
	For        string
	TotalArg   string
	TotalLimit int64
	Earlier    string // who stated the terms prefilled, when someone did
}

// standingArg is one argument of the request in the standing form: it stays the request's value
// ("same"), may take any value ("vary"), or, when an integer, any value from 0 to a ceiling
// ("max").
type standingArg struct {
	Name  string
	Label string
	Raw   string // the request's value, as JSON
	Int   bool
	Bound string // the prefilled choice: same, vary or max
	Max   int64
}

// newStandingOffer is the standing part of the answer form for request a with action document
// d, or nil when the policy allows no standing approval from it: its approvers have no
// standing entry, or its approvals are bound to the state of the action's target.
func newStandingOffer(pol *policy.Policy, a *store.Approval, d *actionDoc, view []policy.ArgumentView) *standingOffer {
	sr := pol.ApproversFor(d.Name).Standing
	act := pol.Actions[d.Name]
	if sr == nil || act == nil || act.Precondition != nil || !a.PreconditionAt.IsZero() {
		return nil
	}
	args := map[string]json.RawMessage{}
	if json.Unmarshal(d.Arguments, &args) != nil {
		return nil
	}
	o := &standingOffer{MaxUses: sr.MaxUses, MaxFor: shortDuration(sr.MaxFor)}
	var earlier *store.StandingTerms
	for _, an := range a.Answers {
		if an.Grant && an.Standing != nil {
			earlier, o.Earlier = an.Standing, an.Name
			o.Uses, o.For = earlier.Uses, shortDuration(time.Duration(earlier.For))
			if earlier.Total != nil {
				o.TotalArg, o.TotalLimit = earlier.Total.Argument, earlier.Total.Limit
			}
			break
		}
	}
	names := make([]string, 0, len(args))
	for name := range args {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		sa := standingArg{Name: name, Raw: string(args[name]), Bound: "same"}
		_, err := strconv.ParseInt(string(args[name]), 10, 64)
		sa.Int = err == nil
		for _, av := range view {
			if av.Name == name {
				sa.Label = av.Label
			}
		}
		if earlier != nil {
			if n, ok := earlier.Max[name]; ok {
				sa.Bound, sa.Max = "max", n
			} else if slices.Contains(earlier.Vary, name) {
				sa.Bound = "vary"
			}
		}
		o.Args = append(o.Args, sa)
	}
	return o
}

// shortDuration writes d without its zero minutes and seconds: "2h", "1h30m", "45m".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// standingTerms reads the standing part of an answer form (the standing.* fields) into the
// terms Guard.Answer checks against the policy, or says why the form cannot be read. Only the
// form's shape is checked here; the bounds are the policy's, decided where every surface's
// grant is decided.
func standingTerms(form url.Values, offer *standingOffer) (*store.StandingTerms, string) {
	if offer == nil {
		return nil, ""
	}
	var t store.StandingTerms
	uses, err := strconv.Atoi(strings.TrimSpace(form.Get("standing.uses")))
	if err != nil {
		return nil, "Say how many calls the standing approval admits (uses: a whole number from 1 to " + strconv.Itoa(offer.MaxUses) + ")."
	}
	t.Uses = uses
	d, err := time.ParseDuration(strings.TrimSpace(form.Get("standing.for")))
	if err != nil {
		return nil, "Say how long the standing approval lasts (for: a duration like 30m or " + offer.MaxFor + ")."
	}
	t.For = store.Duration(d)
	for _, a := range offer.Args {
		switch form.Get("standing.arg." + a.Name) {
		case "", "same":
		case "vary":
			t.Vary = append(t.Vary, a.Name)
		case "max":
			n, err := strconv.ParseInt(strings.TrimSpace(form.Get("standing.max."+a.Name)), 10, 64)
			if err != nil {
				return nil, "Say the most " + a.Name + " may be (a whole number), or keep it the request's."
			}
			if t.Max == nil {
				t.Max = map[string]int64{}
			}
			t.Max[a.Name] = n
		default:
			return nil, "The bound of " + a.Name + " is not one the form offers."
		}
	}
	if arg := form.Get("standing.total"); arg != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(form.Get("standing.total_limit")), 10, 64)
		if err != nil {
			return nil, "Say the total's limit (a whole number), or choose no total."
		}
		t.Total = &store.StandingTotal{Argument: arg, Limit: n}
	}
	return &t, ""
}

// standingGranted is what the flash says of a grant that asked for standing approval id.
func (cs *Console) standingGranted(r *http.Request, id string, after *store.Approval) string {
	if after == nil || after.Status != store.Granted {
		return " The standing approval is granted with the request, once the grants it needs all state the same terms."
	}
	s, err := cs.g.Standing(r.Context(), id)
	if err != nil {
		return " Standing approval " + id + " was granted with it."
	}
	return fmt.Sprintf(" Granted standing approval %s: up to %d calls of %s until %s; %s. The agent presents %s as the approval id.",
		s.ID, s.Terms.Uses, s.ActionName, s.ExpiresAt.UTC().Format("2006-01-02 15:04:05 UTC"), boundsWords(jsonview.StandingTerms{Max: s.Terms.Max, Vary: s.Terms.Vary, Total: s.Terms.Total}), s.ID)
}

package console

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/latchkit/latch/internal/jsonview"
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
	data := &standingData{base: cs.pageBase(w, r, v, "Standing approvals", "standing", nil), State: state}
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
	var parts []string
	names := make([]string, 0, len(t.Max))
	for name := range t.Max {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s ≤ %d", name, t.Max[name]))
	}
	for _, n := range t.Vary {
		parts = append(parts, n+" any")
	}
	if t.Total != nil {
		parts = append(parts, fmt.Sprintf("total %s ≤ %d", t.Total.Argument, t.Total.Limit))
	}
	if len(parts) == 0 {
		return "none: every argument is the request's"
	}
	return strings.Join(parts, ", ")
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

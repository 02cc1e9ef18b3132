package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// envelopeView is one break-glass envelope of the policy, as the page shows it.
type envelopeView struct {
	ID           string
	Subject      string
	Actions      string
	Resources    string
	Constraints  string
	Environments string
	MaxTTL       string
	MaxMinutes   int64
	Openers      string
}

// openedView is one break-glass grant still standing: who opened it, for whom, until when, why.
type openedView struct {
	ID, Envelope, Subject, By, Reason string
	Until                             time.Time
}

type breakGlassData struct {
	base
	Envelopes []envelopeView
	Open      []openedView
	ReadErr   string
}

// breakGlassPage is GET /break-glass: the policy's break-glass envelopes, each with the form
// that opens it, and the break-glass grants still standing.
func (cs *Console) breakGlassPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	cs.drawBreakGlass(w, r, v, http.StatusOK, "")
}

func (cs *Console) drawBreakGlass(w http.ResponseWriter, r *http.Request, v *viewer, status int, msg string) {
	data := &breakGlassData{base: cs.pageBase(w, r, v, "Break-glass", "break-glass", nil)}
	data.Error = msg
	if au := cs.g.Policy().Authority; au != nil {
		for _, e := range au.BreakGlass {
			data.Envelopes = append(data.Envelopes, newEnvelopeView(e))
		}
	}
	if ds, ok := cs.g.Store().(store.DelegationStore); ok {
		all, err := ds.Delegations(r.Context())
		if err != nil {
			data.ReadErr = err.Error()
		}
		now := cs.cfg.Now()
		for _, d := range all {
			if d.Via != store.ViaBreakGlass || !d.RevokedAt.IsZero() {
				continue
			}
			o := openedView{ID: d.ID, Envelope: d.Parent, By: d.CreatedBy, Reason: d.Reason}
			if g, err := policy.ParseGrant(d.ID, d.Grant); err == nil {
				if g.ExpiresAt.Before(now) {
					continue
				}
				o.Subject, o.Until = subjectText(g.Subject), g.ExpiresAt
			}
			data.Open = append(data.Open, o)
		}
	}
	cs.render(w, status, "breakglass", data)
}

func newEnvelopeView(e *policy.Envelope) envelopeView {
	ev := envelopeView{ID: e.ID, Subject: subjectText(e.Subject), Actions: strings.Join(e.Actions, ", "),
		Resources: strings.Join(e.Resources, ", "), Environments: strings.Join(e.Environments, ", "),
		MaxTTL: e.MaxTTL.String(), MaxMinutes: int64(e.MaxTTL / time.Minute), Openers: strings.Join(e.Openers, ", ")}
	var cs []string
	for _, c := range e.Constraints {
		cs = append(cs, fmt.Sprintf("%s: %v", c.Key, c.Operand))
	}
	ev.Constraints = strings.Join(cs, ", ")
	return ev
}

func subjectText(s policy.Subject) string {
	switch {
	case s.User == "":
		return s.Agent
	case s.Agent == "":
		return "any agent for " + s.User
	}
	return s.Agent + " for " + s.User
}

// openBreakGlass is POST /break-glass/{id}/open: the logged-in person opens the envelope's grant
// through Guard.BreakGlass, verified by their session (or trusted proxy), with the form's
// reason, minutes and agent.
func (cs *Console) openBreakGlass(w http.ResponseWriter, r *http.Request, v *viewer) {
	id := r.PathValue("id")
	req := &latch.BreakGlassRequest{Envelope: id, Reason: strings.TrimSpace(r.PostForm.Get("reason")),
		By: store.Approver{Name: v.Name, Method: v.Method, Verified: true}}
	if m := strings.TrimSpace(r.PostForm.Get("minutes")); m != "" {
		n, err := strconv.ParseInt(m, 10, 64)
		if err != nil || n < 1 || n > int64(policy.MaxBreakGlassTTL/time.Minute) {
			cs.drawBreakGlass(w, r, v, http.StatusBadRequest, "Minutes must be a whole number from 1 to the envelope's max TTL. Nothing was opened.")
			return
		}
		req.TTL = time.Duration(n) * time.Minute
	}
	if a := strings.TrimSpace(r.PostForm.Get("agent")); a != "" {
		req.For = latch.Principal{Agent: a}
	}
	d, err := cs.g.BreakGlass(r.Context(), req)
	var ae *latch.AuthorityError
	var pe *policy.Error
	switch {
	case errors.As(err, &ae):
		status := http.StatusForbidden
		if ae.Reason == "invalid_grant" {
			status = http.StatusBadRequest
		}
		cs.drawBreakGlass(w, r, v, status, "Refused: "+ae.Detail+". Nothing was opened.")
		return
	case errors.As(err, &pe):
		cs.drawBreakGlass(w, r, v, http.StatusBadRequest, "The grant cannot be opened: "+pe.Error()+". Nothing was opened.")
		return
	case err != nil:
		cs.drawBreakGlass(w, r, v, http.StatusInternalServerError, "Not opened: "+err.Error())
		return
	}
	cs.flash(w, v, fmt.Sprintf("Opened break-glass %s in %s. It ends at its expiry, or earlier with latch revoke %s.", d.ID, d.Parent, d.ID))
	http.Redirect(w, r, "/break-glass", http.StatusSeeOther)
}

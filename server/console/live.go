package console

import (
	"strconv"
	"strings"
	"time"

	"github.com/latchkit/latch/store"
)

// liveView is what a page's live-update marker tells the console's script: the event to follow
// the stream from, the event kinds that change what the page shows, and, on Needs attention,
// how long until the next change that no event announces.
type liveView struct {
	After int64  // the newest event when the page was drawn; -1: live updates are off
	Kinds string // space-separated event kinds that redraw the page
	// URL is where the page is read (GET): a page drawn as the answer to a form (a refusal) is
	// redrawn from there, never by reloading, which would send the form again.
	URL string
	// Leases is set on Needs attention: the script also redraws the page when a lease lapses,
	// the earliest of Lapse (seconds from the draw; "" for none) and of the leases of effects
	// reserved afterwards (effect_reserved events).
	Leases bool
	Lapse  string
}

// liveCommon are the kinds every page with live updates follows: they change the counts in the
// navigation and the drift banner, which every page shows.
var liveCommon = []string{
	store.EventApprovalRequested, store.EventApprovalGranted, store.EventApprovalDenied, store.EventApprovalConsumed,
	store.EventApprovalInvalidated, store.EventApprovalAnswered,
	store.EventExecutionCommitted, store.EventExecutionFailed, store.EventExecutionAmbiguous,
	store.EventEffectResolved, store.EventReconcileResolved, store.EventOutcomeConflict,
	store.EventUpstreamDrifted, store.EventUpstreamPinMatched,
}

// livePage are the kinds a page follows besides liveCommon: what it shows that the common kinds
// do not change.
var livePage = map[string][]string{
	// A request's reminder, escalation (and who may answer after it) and the standing approval
	// granted from it.
	"approvals": {store.EventApprovalReminded, store.EventApprovalEscalated, store.EventStandingGranted},
	// An execution that suspends or resumes moves its lease: it leaves or enters "executing
	// under a lapsed lease".
	"attention": {store.EventExecutionSuspended, store.EventExecutionResumed},
	// Uses and states of standing approvals.
	"standing": {store.EventStandingGranted, store.EventStandingUsed, store.EventStandingRevoked},
}

// live is the marker of page (a liveView) read at url and drawn after event after; lapse, on
// Needs attention, is the time until the next lease lapses (0 for none).
func live(page, url string, after int64, lapse ...time.Duration) liveView {
	v := liveView{After: after, URL: url, Kinds: strings.Join(append(append([]string(nil), liveCommon...), livePage[page]...), " ")}
	v.Leases = len(lapse) > 0
	if v.Leases && lapse[0] > 0 {
		v.Lapse = strconv.FormatFloat(lapse[0].Seconds(), 'f', 3, 64)
	}
	return v
}

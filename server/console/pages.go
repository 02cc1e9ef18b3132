package console

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// base is what every page's layout needs.
type base struct {
	Title     string
	Nav       string // the current section: approvals, attention, receipts, budgets
	Me        *viewer
	Flash     string
	Error     string
	Pending   int
	Attention int
	// Drifts are the pinned upstream tools a gateway sharing the store last listed otherwise
	// than their pins: a banner on every page until a gateway lists them as pinned again.
	Drifts []store.UpstreamDrift
}

// messageData is a page that only says something.
type messageData struct {
	base
	Message string
}

var funcs = template.FuncMap{
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"iso":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"list": func(s ...string) []string { return s },
	"deref": func(s *string) string {
		if s == nil {
			return "—"
		}
		return *s
	},
	"join": strings.Join,
	"live": live,
	// show is how every text that came from outside the console is put on a page: keys,
	// arguments, action names, principals, reasons, notes, errors, and the messages built from
	// them. showpre is show for the console's own layout of a JSON document (its line breaks kept).
	"show":    func(s string) template.HTML { return marked(s, nil) },
	"showpre": func(s string) template.HTML { return marked(s, jsonLayout) },
}

// jsonLayout keeps the line breaks of an indented JSON document (a line break inside one of its
// strings is already written \n by JSON).
var jsonLayout = &safetext.Layout{Newlines: true}

// marked is s HTML-escaped, with each character that would hide itself or change how the text
// around it reads (a bidi override, a zero-width space, a control character: safetext.Escape,
// as the CLI shows them) written as its visible escape and marked, so that "acct_1<ZWSP>23"
// never reads as "acct_123" and "gpj<RLO>exe.jpg" not as "gpj.exe".
func marked(s string, l *safetext.Layout) template.HTML {
	var b strings.Builder
	l.Pieces(s, func(t string) { b.WriteString(template.HTMLEscapeString(t)) }, func(e string) {
		b.WriteString(`<span class="esc" title="a hidden character, shown as its code">`)
		b.WriteString(template.HTMLEscapeString(e))
		b.WriteString(`</span>`)
	})
	return template.HTML(b.String()) // every piece is escaped above
}

func parsePages() (map[string]*template.Template, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/request.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, p := range []string{"login", "message", "approvals", "approval", "attention", "receipts", "receipt", "budgets", "coverage", "breakglass", "standing"} {
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, "templates/"+p+".html")
		if err != nil {
			return nil, err
		}
		out[p] = t
	}
	return out, nil
}

// counted is what a page has read already of what the layout counts, so that the layout does
// not read it again: the pending requests, and the effects that need attention. A nil field is
// read by pageBase.
type counted struct {
	pending   []*store.Approval
	attention []*store.Effect
}

// pageBase is the layout data of a logged-in page; it takes the session's flash message. c
// (which may be nil) holds what the page has read already.
func (cs *Console) pageBase(w http.ResponseWriter, r *http.Request, v *viewer, title, nav string, c *counted) base {
	b := base{Title: title, Nav: nav, Me: v, Flash: cs.takeFlash(w, r, v)}
	if c == nil {
		c = &counted{}
	}
	pending, err := c.pending, error(nil)
	if pending == nil {
		pending, err = cs.g.Store().Approvals(r.Context(), store.ApprovalFilter{Status: store.Pending})
	}
	if err == nil {
		now := cs.cfg.Now()
		for _, a := range pending {
			if now.Before(a.ExpiresAt) {
				b.Pending++
			}
		}
	}
	attention, err := c.attention, error(nil)
	if attention == nil {
		attention, err = cs.attention(r)
	}
	if err == nil {
		b.Attention = len(attention)
	}
	if drifts, err := store.OpenDrifts(r.Context(), cs.g.Store()); err == nil {
		b.Drifts = drifts
	} else {
		cs.log.Error("latch console: the upstream pin drifts could not be read", "err", err)
	}
	return b
}

// flashCookie is the name of the cookie that carries a message to the next page (a form's
// outcome, after its redirect).
func (cs *Console) flashCookie() string {
	if cs.cfg.Secure {
		return "__Host-latch_flash"
	}
	return "latch_flash"
}

// maxFlash bounds a flash message, so that its cookie stays well within what browsers keep.
const maxFlash = 1500

// flash shows msg on v's next page. The message travels in a short-lived cookie signed with v's
// session secret: it needs no write to the store, reaches whichever replica draws the next
// page, and a cookie not set by this session's own form shows nothing.
func (cs *Console) flash(w http.ResponseWriter, v *viewer, msg string) {
	if v.secret == "" {
		return
	}
	if len(msg) > maxFlash {
		msg = msg[:maxFlash] + "…"
	}
	cs.setCookie(w, cs.flashCookie(), base64.RawURLEncoding.EncodeToString([]byte(msg))+"."+mac(v.secret, "flash\x00"+msg), 60)
}

// takeFlash returns the message flash left for v, and clears it; "" when there is none or its
// signature is not v's.
func (cs *Console) takeFlash(w http.ResponseWriter, r *http.Request, v *viewer) string {
	ck, err := r.Cookie(cs.flashCookie())
	if err != nil || v == nil || v.secret == "" {
		return ""
	}
	cs.setCookie(w, cs.flashCookie(), "", -1)
	enc, sig, ok := strings.Cut(ck.Value, ".")
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if !ok || err != nil || !sameToken(sig, mac(v.secret, "flash\x00"+string(raw))) {
		return ""
	}
	return string(raw)
}

func (cs *Console) render(w http.ResponseWriter, status int, page string, data any) {
	var buf bytes.Buffer
	if err := cs.pages[page].ExecuteTemplate(&buf, "layout.html", data); err != nil {
		cs.log.Error("latch console: template failed", "page", page, "err", err)
		http.Error(w, "the page could not be drawn", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers with a page that says what was refused.
func (cs *Console) fail(w http.ResponseWriter, r *http.Request, v *viewer, status int, msg string) {
	b := base{Title: http.StatusText(status), Me: v}
	if v != nil {
		b = cs.pageBase(w, r, v, http.StatusText(status), "", nil)
	}
	b.Error = msg
	cs.render(w, status, "message", &messageData{base: b})
}

// approvalView is one approval request as a person reads it before answering.
type approvalView struct {
	ID          string
	Status      string
	Action      string
	Hash        string
	Resource    string
	Agent       string
	User        string
	Environment string
	Summary     string
	Args        []policy.ArgumentView
	ArgsJSON    string
	Rule        string
	RuleLine    int
	PolicyHash  string
	PolicyVer   string
	PolicyNow   bool // the request was made under the policy the server runs now
	CreatedAt   time.Time
	ExpiresAt   time.Time
	TimeLeft    string
	Expired     bool
	Approver    string
	Note        string
	AnsweredAt  time.Time
	// StateAt is when the state of the action's target was read for the request (zero when no
	// precondition applies), StateHash its fingerprint ("" for a target without state).
	StateAt   time.Time
	StateHash string
	Denials   []denialView
	Answers   []answerView
	Required  int
	Given     int
	CanAnswer bool
	WhyNot    string
	CSRF      string
	Roles     string // the roles the policy names for the action's approvers
	Verified  bool   // the policy counts verified answers only
	// Reminder and Escalation say when the request is reminded about and escalated, to whom,
	// and whether that was sent ("" when the policy sets no such step: operator.ReadReminders).
	Reminder, Escalation string
	// Escalated is set once the request has waited its escalate_after: those it escalates to
	// may answer it (and Roles lists the roles it escalated to).
	Escalated bool
	// Editable are the arguments the approver may narrow when granting
	// (docs/approvals.md#approve-with-edits), each with the bounds the policy allows; empty
	// when none applies.
	Editable []editField
	// Edits are the approvers' edits of the request, oldest first, and Requested the
	// arguments it first asked with (exact JSON); both empty when nobody edited it.
	Edits     []editView
	Requested string
	// Standing is the form's part granting a standing approval from the request, with what
	// the policy allows; nil when the viewer may not answer or the policy allows none.
	Standing *standingOffer
	// GrantedStanding are the standing approvals granted from the request (standing_granted).
	GrantedStanding []grantedStanding
}

// grantedStanding is a standing approval granted from a request, as its page names it.
type grantedStanding struct {
	ID    string
	Uses  int64
	Until string
}

// editField is one argument of the "Approve with changes" form: its name and label, the value
// the request binds (the most it may be) and the least it may be.
type editField struct {
	Name   string
	Label  string
	Value  int64
	Min    int64
	HasMin bool
}

// editView is one approver's edit as the request page shows it.
type editView struct {
	By      string
	At      time.Time
	Changes string // "amount 50000 → 40000"
}

type denialView struct {
	ID        string
	Approver  string
	At        time.Time
	Note      string
	SameHash  bool
	Arguments string
}

type answerView struct {
	Approver string
	Grant    bool
	Method   string
	Verified bool
	At       time.Time
	Note     string
}

// actionDoc is the canonical action document an approval request is bound to.
type actionDoc struct {
	Name        string          `json:"name"`
	Arguments   json.RawMessage `json:"arguments"`
	Resource    string          `json:"resource"`
	Environment string          `json:"environment"`
	Principal   struct {
		Agent string `json:"agent"`
		User  string `json:"user"`
	} `json:"principal"`
}

// newApprovalView is a as v reads it; denied are the denied requests, among which the earlier
// denials of a's action are found.
func (cs *Console) newApprovalView(r *http.Request, v *viewer, a *store.Approval, denied []*store.Approval) *approvalView {
	now := cs.cfg.Now()
	var d actionDoc
	_ = json.Unmarshal(a.Action, &d)
	if d.Name == "" {
		d.Name = a.ActionName
	}
	if d.Principal.Agent == "" {
		d.Principal.Agent, d.Principal.User = a.Agent, a.User
	}
	pol := cs.g.Policy()
	av := &approvalView{ID: a.ID, Status: string(a.Status), Action: d.Name, Hash: a.ActionHash, Resource: d.Resource,
		Agent: d.Principal.Agent, User: d.Principal.User, Environment: d.Environment, PolicyHash: a.PolicyHash,
		PolicyNow: a.PolicyHash == pol.Hash, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt,
		Approver: a.Approver, Note: a.Note, AnsweredAt: a.AnsweredAt, Required: 1, CSRF: v.CSRF,
		StateAt: a.PreconditionAt, StateHash: a.PreconditionHash}
	if av.PolicyNow {
		av.PolicyVer = pol.Version
	}
	// Every argument the policy redacts is shown masked, never in full (the hash binds it).
	av.ArgsJSON = prettyJSON(pol.RedactJSON(d.Name, d.Arguments))
	if val, err := canon.Parse(d.Arguments); err == nil {
		if args, ok := val.(map[string]any); ok {
			av.Args = pol.View(d.Name, args)
		}
	}
	av.Summary = summary(&d, av.Args)
	left := a.ExpiresAt.Sub(now)
	av.Expired = left <= 0
	av.TimeLeft = timeLeft(left)
	// The rule that asked: the policy_evaluated event of the call that made the request.
	if evs, err := cs.g.Store().Events(r.Context(), store.EventFilter{ApprovalID: a.ID}); err == nil {
		av.Reminder, av.Escalation = operator.ReadReminders(jsonview.RemindersOf(pol, a, evs))
		for _, e := range evs {
			if e.Kind == store.EventStandingGranted {
				var p struct {
					Standing  string `json:"standing"`
					Uses      int64  `json:"uses"`
					ExpiresAt string `json:"expires_at"`
				}
				if json.Unmarshal(e.Payload, &p) == nil && p.Standing != "" {
					av.GrantedStanding = append(av.GrantedStanding, grantedStanding{ID: p.Standing, Uses: p.Uses, Until: p.ExpiresAt})
				}
			}
		}
		for _, e := range evs {
			if e.Kind != store.EventPolicyEvaluated {
				continue
			}
			var p struct {
				Reason string `json:"reason"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			av.Rule = p.Reason
			break
		}
	}
	if av.PolicyNow {
		if act := pol.Actions[d.Name]; act != nil {
			var i int
			if n, err := fmt.Sscanf(av.Rule, "rule[%d]", &i); err == nil && n == 1 && i >= 0 && i < len(act.Rules) {
				av.RuleLine = act.Rules[i].Pos.Line
			} else if act.Decision != "" {
				av.RuleLine = act.Pos.Line
			}
		}
	}
	for _, o := range denied {
		if o.ID == a.ID || o.Status != store.Denied || o.ActionName != a.ActionName {
			continue
		}
		var od actionDoc
		_ = json.Unmarshal(o.Action, &od)
		av.Denials = append(av.Denials, denialView{ID: o.ID, Approver: o.Approver, At: o.AnsweredAt, Note: o.Note,
			SameHash: o.ActionHash == a.ActionHash, Arguments: string(pol.RedactJSON(o.ActionName, od.Arguments))})
	}
	slices.SortFunc(av.Denials, func(x, y denialView) int { return y.At.Compare(x.At) })
	if len(av.Denials) > 5 {
		av.Denials = av.Denials[:5]
	}
	rule := pol.ApproversFor(d.Name)
	if a.Status == store.Pending && rule.Escalated(a.CreatedAt, now) {
		rule, av.Escalated = rule.EscalatedRule(), true
	}
	av.Required = rule.Required
	if a.Required > 0 && a.Status != store.Pending {
		av.Required = a.Required // as it stood when the request was decided
	}
	for _, an := range a.Answers {
		av.Answers = append(av.Answers, answerView{Approver: an.Name, Grant: an.Grant, Method: an.Method, Verified: an.Verified, At: an.At, Note: an.Note})
	}
	av.Given = store.Grants(a.Answers, rule.Verified)
	if len(a.Answers) == 0 && a.Approver != "" { // answered before answers were kept
		av.Answers = []answerView{{Approver: a.Approver, Grant: a.Status != store.Denied, At: a.AnsweredAt, Note: a.Note}}
		if a.Status != store.Denied {
			av.Given = 1
		}
	}
	if len(rule.Roles) > 0 {
		av.Roles = strings.Join(rule.Roles, ", ")
	}
	av.Verified = rule.Verified
	av.CanAnswer, av.WhyNot = cs.mayAnswer(v, a, &d)
	if av.CanAnswer {
		av.Editable = editFields(pol.Actions[d.Name], av.Args, d.Arguments)
		av.Standing = newStandingOffer(pol, a, &d, av.Args)
	}
	cs.addEdits(r, av, a)
	return av
}

// editFields are the arguments of action an approver may narrow on a request whose arguments
// are args (canonical JSON): those the policy marks editable that the request passed as
// integers, in the policy's order.
func editFields(action *policy.Action, view []policy.ArgumentView, args json.RawMessage) []editField {
	if action == nil {
		return nil
	}
	v, err := canon.Parse(args)
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		return nil
	}
	var out []editField
	for _, d := range action.Arguments {
		n, ok := m[d.Name].(int64)
		if d.Editable == nil || !ok {
			continue
		}
		f := editField{Name: d.Name, Value: n}
		for _, m := range []*int64{d.Editable.Min, d.Min} {
			if m != nil && !f.HasMin {
				f.Min, f.HasMin = *m, true
			}
		}
		for _, av := range view {
			if av.Name == d.Name {
				f.Label = av.Label
			}
		}
		out = append(out, f)
	}
	return out
}

// addEdits sets the edits of request a on av, read from its events: edits come only with
// grants, so a request without one is not read.
func (cs *Console) addEdits(r *http.Request, av *approvalView, a *store.Approval) {
	if !slices.ContainsFunc(a.Answers, func(x store.Answer) bool { return x.Grant }) {
		return
	}
	evs, err := cs.g.Store().Events(r.Context(), store.EventFilter{ApprovalID: a.ID})
	if err != nil {
		return
	}
	edits, err := store.EditsOf(evs)
	if err != nil || len(edits) == 0 {
		return
	}
	av.Requested = prettyJSON(cs.g.Policy().RedactJSON(av.Action, edits[0].Requested))
	for _, e := range edits {
		var ch []string
		for _, c := range e.Changes {
			ch = append(ch, fmt.Sprintf("%s %s → %s", c.Argument, c.From, c.To))
		}
		av.Edits = append(av.Edits, editView{By: store.Approver{Name: e.By, Method: e.Method}.String(), At: e.At, Changes: strings.Join(ch, ", ")})
	}
}

// mayAnswer says whether v may answer a, and if not, why: the request is still open, v did
// not ask for it, v has not answered it yet, and the policy's approvers of the action include v
// (a role listing v, or v's account's role).
func (cs *Console) mayAnswer(v *viewer, a *store.Approval, d *actionDoc) (bool, string) {
	now := cs.cfg.Now()
	switch {
	case a.Status != store.Pending:
		return false, "This request is " + string(a.Status) + "."
	case !now.Before(a.ExpiresAt):
		return false, "This request has expired."
	case store.SameName(v.Name, d.Principal.Agent) || d.Principal.User != "" && store.SameName(v.Name, d.Principal.User):
		return false, "You asked for this action: someone else must answer it."
	}
	for _, an := range a.Answers {
		if store.SameName(an.Name, v.Name) {
			return false, "You have answered this request; it waits for the other approvers."
		}
	}
	pol := cs.g.Policy()
	rule := pol.ApproversFor(d.Name).RuleAt(a.CreatedAt, now)
	if ent := pol.Entitled(rule, v.Name, v.Roles); !ent.Entitled {
		return false, "You are not among the approvers of " + d.Name + " (the policy names " + strings.Join(rule.Roles, ", ") + "): you can read this request but not answer it."
	}
	return true, ""
}

// summary says in words what will happen if the request is granted.
func summary(d *actionDoc, args []policy.ArgumentView) string {
	var b strings.Builder
	b.WriteString(d.Principal.Agent)
	if d.Principal.User != "" {
		b.WriteString(" (for " + d.Principal.User + ")")
	}
	b.WriteString(" will run " + d.Name)
	if d.Resource != "" {
		b.WriteString(" on " + d.Resource)
	}
	if d.Environment != "" {
		b.WriteString(" in " + d.Environment)
	}
	var parts []string
	for _, a := range args {
		name := a.Name
		if a.Label != "" {
			name = a.Label
		}
		val := a.Raw
		if a.Human != "" {
			val = a.Human
		}
		parts = append(parts, name+" "+val)
	}
	if len(parts) > 0 {
		b.WriteString(": " + strings.Join(parts, ", "))
	}
	b.WriteString(".")
	return b.String()
}

func timeLeft(d time.Duration) string {
	switch {
	case d <= 0:
		return "expired"
	case d < time.Minute:
		return fmt.Sprintf("%ds left", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm left", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm left", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd left", int(d.Hours()/24))
}

func prettyJSON(raw []byte) string {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}

type approvalsData struct {
	base
	Requests []*approvalView
	LastID   int64
}

// approvalsPage is GET /approvals: the pending requests, each with all it needs to be answered
// (among it the earlier denials of its action). It reads the pending and the denied requests
// once each, never the whole history.
func (cs *Console) approvalsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	pending, err := cs.op.ApprovalRecords(r.Context(), string(store.Pending))
	if err != nil {
		cs.fail(w, r, v, http.StatusServiceUnavailable, "The store does not answer: "+err.Error())
		return
	}
	denied, err := cs.op.ApprovalRecords(r.Context(), string(store.Denied))
	if err != nil {
		cs.fail(w, r, v, http.StatusServiceUnavailable, "The store does not answer: "+err.Error())
		return
	}
	if pending == nil {
		pending = []*store.Approval{} // read: the layout need not read it again
	}
	data := &approvalsData{base: cs.pageBase(w, r, v, "Pending approvals", "approvals", &counted{pending: pending}), LastID: cs.lastEvent(r)}
	now := cs.cfg.Now()
	for _, a := range pending {
		if now.Before(a.ExpiresAt) {
			data.Requests = append(data.Requests, cs.newApprovalView(r, v, a, denied))
		}
	}
	cs.render(w, http.StatusOK, "approvals", data)
}

// lastEvent is the id of the newest event, where the page's live updates start; -1 when it
// cannot be read, and the page is drawn without them: starting from 0 instead would replay every
// event, and each would reload the page.
func (cs *Console) lastEvent(r *http.Request) int64 {
	if h, ok := cs.g.Store().(store.EventHead); ok {
		id, err := h.LastEventID(r.Context())
		if err != nil {
			cs.log.Warn("console: the newest event could not be read: the page is drawn without live updates", "err", err)
			return -1
		}
		return id
	}
	var last int64
	for {
		evs, err := cs.g.Store().Events(r.Context(), store.EventFilter{AfterID: last, Limit: 1000})
		if err != nil {
			cs.log.Warn("console: the newest event could not be read: the page is drawn without live updates", "err", err)
			return -1
		}
		if len(evs) == 0 {
			return last
		}
		last = evs[len(evs)-1].ID
	}
}

type approvalData struct {
	base
	R      *approvalView
	LastID int64
}

// approvalPage is GET /approvals/{id}: one request, in any status.
func (cs *Console) approvalPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	a, all, ok := cs.loadApproval(w, r, v)
	if !ok {
		return
	}
	cs.render(w, http.StatusOK, "approval", &approvalData{base: cs.pageBase(w, r, v, "Approval "+a.ID, "approvals", nil),
		R: cs.newApprovalView(r, v, a, all), LastID: cs.lastEvent(r)})
}

func (cs *Console) loadApproval(w http.ResponseWriter, r *http.Request, v *viewer) (*store.Approval, []*store.Approval, bool) {
	id := r.PathValue("id")
	a, err := cs.g.Store().Approval(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		cs.fail(w, r, v, http.StatusNotFound, "There is no approval request "+id+".")
		return nil, nil, false
	case err != nil:
		cs.fail(w, r, v, http.StatusServiceUnavailable, "The store does not answer: "+err.Error())
		return nil, nil, false
	}
	all, err := cs.op.ApprovalRecords(r.Context(), string(store.Denied))
	if err != nil {
		cs.fail(w, r, v, http.StatusServiceUnavailable, "The store does not answer: "+err.Error())
		return nil, nil, false
	}
	return a, all, true
}

// answer is POST /approvals/{id}/answer: decision grant or deny, with an optional note.
func (cs *Console) answer(w http.ResponseWriter, r *http.Request, v *viewer) {
	id := r.PathValue("id")
	grant, edit, standing := false, false, false
	switch r.PostForm.Get("decision") {
	case "grant":
		grant = true
	case "edit":
		grant, edit = true, true
	case "standing":
		grant, standing = true, true
	case "deny":
	default:
		cs.fail(w, r, v, http.StatusBadRequest, "Say grant or deny. Nothing was changed.")
		return
	}
	note := strings.TrimSpace(r.PostForm.Get("note"))
	a, all, ok := cs.loadApproval(w, r, v)
	if !ok {
		return
	}
	var d actionDoc
	_ = json.Unmarshal(a.Action, &d)
	if d.Principal.Agent == "" {
		d.Principal.Agent, d.Principal.User = a.Agent, a.User
	}
	if ok, why := cs.mayAnswer(v, a, &d); !ok && a.Status == store.Pending && cs.cfg.Now().Before(a.ExpiresAt) {
		cs.refuseAnswer(w, r, v, a, all, http.StatusForbidden, why+" Nothing was changed.")
		return
	}
	var set json.RawMessage
	if edit {
		var msg string
		if set, msg = editSet(r.PostForm, editFields(cs.g.Policy().Actions[d.Name], nil, d.Arguments)); msg != "" {
			cs.refuseAnswer(w, r, v, a, all, http.StatusUnprocessableEntity, msg+" Nothing was changed.")
			return
		}
	}
	var terms *store.StandingTerms
	if standing {
		// The terms go to Guard.Answer exactly as the API's and the CLI's do; what the policy
		// allows is decided there, whatever this page offered.
		offer := newStandingOffer(cs.g.Policy(), a, &d, nil)
		if offer == nil {
			cs.refuseAnswer(w, r, v, a, all, http.StatusForbidden, "Refused ("+store.ReasonStandingNotAllowed+"): the policy allows no standing approval of "+a.ActionName+" from this request. Nothing was changed.")
			return
		}
		var msg string
		if terms, msg = standingTerms(r.PostForm, offer); msg != "" {
			cs.refuseAnswer(w, r, v, a, all, http.StatusUnprocessableEntity, msg+" Nothing was changed.")
			return
		}
	}
	ar := &store.AnswerRequest{ID: id, Grant: grant, Approver: v.Name, Note: note, Method: v.Method, Verified: true, Set: set, Standing: terms}
	after, err := cs.g.Answer(r.Context(), ar)
	var ae *store.AnswerError
	var se *store.StandingError
	switch {
	case errors.As(err, &se):
		if cur, err := cs.g.Store().Approval(r.Context(), id); err == nil {
			a = cur
		}
		cs.refuseAnswer(w, r, v, a, all, jsonview.StandingStatus(se.Reason), "Refused ("+se.Reason+"): "+se.Detail+". Nothing was changed.")
		return
	case errors.As(err, &ae):
		if cur, err := cs.g.Store().Approval(r.Context(), id); err == nil {
			a = cur
		}
		why := answerRefusal(ae.Reason)
		if ae.Detail != "" {
			why = ae.Detail + "; nothing was changed."
		}
		cs.refuseAnswer(w, r, v, a, all, jsonview.AnswerStatus(ae.Reason), "Refused ("+ae.Reason+"): "+why)
		return
	case err != nil:
		cs.fail(w, r, v, http.StatusServiceUnavailable, "The answer was not recorded: "+err.Error())
		return
	}
	verb := "Denied"
	if grant {
		verb = "Approved"
	}
	msg := fmt.Sprintf("%s %s (%s) as %s.", verb, id, a.ActionName, v.Name)
	if edit {
		msg = fmt.Sprintf("Approved %s (%s) as %s, with your changes: the call runs only with the edited arguments.", id, a.ActionName, v.Name)
	}
	if after != nil && after.Status == store.Pending {
		rule := cs.g.Policy().ApproversFor(a.ActionName)
		msg += fmt.Sprintf(" %d of %d approvals so far: it waits for another approver.", store.Grants(after.Answers, rule.Verified), rule.Required)
	}
	if standing {
		msg += cs.standingGranted(r, ar.StandingID, after)
	}
	cs.flash(w, v, msg)
	http.Redirect(w, r, "/approvals", http.StatusSeeOther)
}

// editSet is the JSON object of the "Approve with changes" form's set.NAME fields that differ
// from what the request binds, for the editable fields; or why the form cannot be read.
func editSet(form url.Values, fields []editField) (json.RawMessage, string) {
	set := map[string]int64{}
	for _, f := range fields {
		raw := strings.TrimSpace(form.Get("set." + f.Name))
		if raw == "" {
			continue
		}
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return nil, "The new value of " + f.Name + " is not a whole number."
		}
		if n != f.Value {
			set[f.Name] = n
		}
	}
	if len(set) == 0 {
		return nil, "Change a value to approve with changes, or approve as it is."
	}
	b, err := json.Marshal(set)
	if err != nil {
		return nil, "The changes could not be read."
	}
	return b, ""
}

func answerRefusal(reason string) string {
	switch reason {
	case "already_granted", "already_denied", "already_consumed", "already_expired":
		return "the request was already answered (" + strings.TrimPrefix(reason, "already_") + "); your answer was not recorded."
	case store.ReasonAlreadyAnswered:
		return "you have already answered this request; one person counts once."
	case store.ReasonNotEntitled:
		return "you are not among the approvers the policy names for this action; nothing was changed."
	case store.ReasonNotVerified:
		return "this action counts verified answers only; nothing was changed."
	case "expired":
		return "the request expired before your answer; it is now marked expired."
	case "self_approval":
		return "you asked for this action, so you cannot answer it."
	case "invalid_note":
		return "the note is not valid text (a control character, or too long); nothing was changed."
	}
	return "nothing was changed."
}

func (cs *Console) refuseAnswer(w http.ResponseWriter, r *http.Request, v *viewer, a *store.Approval, all []*store.Approval, status int, msg string) {
	b := cs.pageBase(w, r, v, "Approval "+a.ID, "approvals", nil)
	b.Error = msg
	cs.render(w, status, "approval", &approvalData{base: b, R: cs.newApprovalView(r, v, a, all), LastID: cs.lastEvent(r)})
}

// effectView is an effect whose outcome a person must settle.
type effectView struct {
	Key        string
	Ref        string // the key as its resolve form names it (effectRef)
	Seen       string // the attempt and last update the card shows (effectSeen)
	State      string
	Why        string
	Action     string
	Attempt    int
	Error      string
	Conflict   string
	Lease      time.Time
	Updated    time.Time
	ArgsJSON   string
	Events     []eventView
	Receipts   []receiptRow
	Resolvable bool   // the viewer may resolve it (Guard.MayResolve)
	WhyNot     string // why not, when they may not
}

type eventView struct {
	ID      int64
	Kind    string
	At      time.Time
	Payload string
}

// attention returns the effects that need a person, by the one definition every surface lists
// (operator.NeedsPerson): ambiguous, executing under a lapsed lease, and resolved ones whose
// holder reported otherwise afterwards.
func (cs *Console) attention(r *http.Request) ([]*store.Effect, error) {
	return cs.op.EffectRecords(r.Context(), operator.StateNeedsPerson)
}

type attentionData struct {
	base
	Effects []*effectView
	LastID  int64
	Lapse   time.Duration // until the next lease of an executing effect lapses (operator.Attention)
}

// attentionPage is GET /attention.
func (cs *Console) attentionPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	// One read of the unsettled effects gives both what needs a person, by the definition every
	// surface lists (operator.NeedsPerson, as cs.attention), and the executing ones whose leases
	// are live now: they enter the list when their leases lapse, which no event announces.
	att, err := cs.op.Attention(r.Context())
	if err != nil {
		cs.fail(w, r, v, http.StatusServiceUnavailable, "The store does not answer: "+err.Error())
		return
	}
	list := att.NeedsPerson
	if list == nil {
		list = []*store.Effect{} // read: the layout need not read it again
	}
	data := &attentionData{base: cs.pageBase(w, r, v, "Needs attention", "attention", &counted{attention: list}), LastID: cs.lastEvent(r)}
	for _, e := range list {
		data.Effects = append(data.Effects, cs.newEffectView(r, v, e))
	}
	data.Lapse = att.NextLapse
	cs.render(w, http.StatusOK, "attention", data)
}

func (cs *Console) newEffectView(r *http.Request, v *viewer, e *store.Effect) *effectView {
	ev := &effectView{Key: e.Key, Ref: effectRef(e.Key), Seen: effectSeen(e), State: string(e.State), Action: e.Action, Attempt: e.Attempt, Error: e.Error,
		Conflict: e.Conflict, Lease: e.LeaseExpiresAt, Updated: e.UpdatedAt, ArgsJSON: prettyJSON(cs.g.Policy().RedactJSON(e.Action, e.Arguments)), Resolvable: true}
	// The form is offered only to someone the resolution would not refuse, by the rule it is
	// refused by; an error reading what the rule needs leaves it offered (the resolution checks
	// again).
	var re *store.ResolveError
	if err := cs.g.MayResolve(r.Context(), e, "console:"+v.Name); errors.As(err, &re) {
		ev.Resolvable, ev.WhyNot = false, resolveRefusal(re, e.Action)
	}
	switch {
	case e.State == store.Ambiguous:
		ev.Why = "The outcome of attempt " + strconv.Itoa(e.Attempt) + " is unknown: it may or may not have happened. Retries are refused until someone says which."
	case e.State == store.Executing:
		ev.Why = "The holder's lease lapsed at " + e.LeaseExpiresAt.UTC().Format(time.RFC3339) + " without an outcome: it may still be acting, or it died."
	default:
		ev.Why = "Resolved " + string(e.State) + " by " + e.ResolvedBy + ", but the holder reported otherwise afterwards."
	}
	if evs, err := cs.g.Store().Events(r.Context(), store.EventFilter{EffectKey: e.Key}); err == nil {
		if len(evs) > 50 {
			evs = evs[len(evs)-50:]
		}
		for _, x := range evs {
			ev.Events = append(ev.Events, eventView{ID: x.ID, Kind: x.Kind, At: x.Time, Payload: string(jsonview.NewEvent(cs.g.Policy(), x).Payload)})
		}
	}
	for rc, err := range cs.op.Receipts(r.Context(), store.ReceiptFilter{EffectKey: e.Key}) {
		if err != nil {
			break
		}
		ev.Receipts = append(ev.Receipts, newReceiptRow(rc))
	}
	return ev
}

// effectRef names an effect key in the path of its resolve form: the key's bytes, base64url
// without padding. A key is whatever an agent sent, and a URL built from it by concatenation
// would be read back as another key: "%38%38" percent-decodes to "88", "/../" is cleaned away,
// "#" and "?" end the path. The encoding's alphabet has none of these, and decoding it gives
// back exactly the key the card showed.
func effectRef(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

// effectSeen is what a card shows of an effect that a person's answer is about: the attempt
// that holds it (its action id) and its last update. A resolve form carries it, and the
// resolution is bound to it (store.ResolveRequest Holder and Updated): it is refused, in the
// store's own transaction, if the effect has moved on since (a later attempt, another
// resolution, a late outcome).
func effectSeen(e *store.Effect) string {
	return e.ActionID + "." + strconv.FormatInt(e.UpdatedAt.UnixNano(), 10)
}

// parseSeen reads effectSeen back: the holder's action id and the update; ok is false for
// anything effectSeen does not write.
func parseSeen(seen string) (holder string, updated time.Time, ok bool) {
	holder, stamp, found := strings.Cut(seen, ".")
	n, err := strconv.ParseInt(stamp, 10, 64)
	if !found || holder == "" || err != nil {
		return "", time.Time{}, false
	}
	return holder, time.Unix(0, n), true
}

// resolveRefusal says to a person why they may not resolve an effect of action.
func resolveRefusal(re *store.ResolveError, action string) string {
	switch re.Reason {
	case store.ReasonSelfResolution:
		return "Attempt " + strconv.Itoa(re.Attempt) + " is yours (you are its agent or the user it acted for): someone else must say what happened."
	case store.ReasonNotEntitled:
		return "You are not among the approvers the policy names for " + action + ": you can read this effect but not resolve it."
	case store.ReasonHolderUnknown:
		return "Who made attempt " + strconv.Itoa(re.Attempt) + " cannot be checked (the events naming it are gone), so nobody can resolve it here."
	}
	return "You may not resolve this effect (" + re.Reason + ")."
}

// resolve is POST /effects/{ref}/resolve: to committed (with an optional result) or failed,
// with an optional note. ref is effectRef of the key, and the form's seen field is effectSeen
// of the effect as its card showed it.
func (cs *Console) resolve(w http.ResponseWriter, r *http.Request, v *viewer) {
	raw, err := base64.RawURLEncoding.DecodeString(r.PathValue("ref"))
	if err != nil {
		cs.fail(w, r, v, http.StatusNotFound, "This form names no effect: use the resolve form of the effect's card under Needs attention. Nothing was changed.")
		return
	}
	key := string(raw)
	// The operator layer's one reading of a resolution, as the API, the CLI and the operator MCP
	// read theirs: what happened, a result only with committed (stored canonical: the
	// resolution's receipt hashes those bytes), a note.
	res := &operator.Resolution{To: r.PostForm.Get("to"), Note: strings.TrimSpace(r.PostForm.Get("note"))}
	if s := strings.TrimSpace(r.PostForm.Get("result")); s != "" {
		res.Result = json.RawMessage(s)
	}
	req, err := res.Check(key, "console:"+v.Name)
	if ie := (*operator.InputError)(nil); errors.As(err, &ie) {
		msg := "Say committed or failed."
		switch ie.Field {
		case "result":
			msg = "The result cannot be stored: " + ie.Detail + "."
		case "note":
			msg = "The note cannot be stored: " + ie.Detail + "."
		}
		cs.fail(w, r, v, http.StatusBadRequest, msg+" Nothing was changed.")
		return
	}
	to := req.To
	// The effect must be the one the card showed: the same key (decoded above, byte for byte),
	// held by the same attempt, unchanged since. The resolution is bound to that (Holder,
	// Updated) and the store checks it in the write's own transaction: a retry that reserves a
	// new attempt after this handler began is never resolved on the old card.
	holder, updated, ok := parseSeen(r.PostForm.Get("seen"))
	if !ok {
		cs.fail(w, r, v, http.StatusBadRequest, "This form does not say which attempt its card showed: use the resolve form of the effect's card under Needs attention. Nothing was changed.")
		return
	}
	req.Holder, req.Updated = holder, updated
	_, err = cs.g.ResolveEffect(r.Context(), req)
	var re *store.ResolveError
	switch {
	case errors.Is(err, store.ErrNotFound):
		cs.fail(w, r, v, http.StatusNotFound, "There is no effect "+key+". Nothing was changed.")
		return
	case errors.Is(err, store.ErrNotAmbiguous):
		now := "it was settled"
		if cur, err := cs.g.Store().Effect(r.Context(), key); err == nil {
			now = "it is now " + string(cur.State) + ", attempt " + strconv.Itoa(cur.Attempt)
		}
		cs.fail(w, r, v, http.StatusConflict, "Effect "+key+" changed since your page was drawn ("+now+"): reload Needs attention and check again. Nothing was changed.")
		return
	case errors.As(err, &re):
		status := http.StatusForbidden // this person may not resolve it
		if re.Reason == store.ReasonHolderUnknown {
			status = http.StatusConflict // nobody may, as things stand
		}
		cs.fail(w, r, v, status, "Refused ("+re.Reason+"): "+resolveRefusal(re, actionOf(r, cs, key))+" Nothing was changed.")
		return
	case err != nil:
		cs.fail(w, r, v, http.StatusBadRequest, "Not resolved: "+err.Error())
		return
	}
	cs.flash(w, v, fmt.Sprintf("Resolved %s as %s.", key, to))
	http.Redirect(w, r, "/attention", http.StatusSeeOther)
}

// actionOf is the action of the effect key, for a message; "its action" when it cannot be read.
func actionOf(r *http.Request, cs *Console, key string) string {
	if e, err := cs.g.Store().Effect(r.Context(), key); err == nil {
		return e.Action
	}
	return "its action"
}

// receiptRow is one receipt in a list.
type receiptRow struct {
	Seq        int64
	Hash       string
	Action     string
	Result     string
	Decision   string
	EffectKey  string
	Principal  string
	Approver   string
	FinishedAt time.Time
	Error      string
	doc        []byte
}

// newReceiptRow is r as a row; a row whose document does not read as a receipt shows its result
// as "unreadable", as every surface marks it (jsonview.Receipt's unreadable).
func newReceiptRow(r operator.Receipt) receiptRow {
	row := receiptRow{Seq: r.View.Seq, Hash: r.View.Hash, doc: r.View.Receipt}
	if d := r.Doc; d != nil {
		row.Action, row.Result, row.Decision, row.EffectKey = d.Action, d.Result, d.Decision, d.EffectKey
		row.Principal = d.Principal.Agent
		if d.Principal.User != "" {
			row.Principal += " / " + d.Principal.User
		}
		row.Approver, row.FinishedAt, row.Error = d.Approver, d.FinishedAt, d.Error
	} else {
		row.Result = "unreadable"
		row.Error = *r.View.Unreadable
	}
	return row
}

type receiptsData struct {
	base
	Query    string
	Rows     []receiptRow
	Chain    jsonview.ChainReport
	ChainErr string
	More     bool
}

const receiptsShown = 100

// receiptsPage is GET /receipts[?q=]: the newest receipts (those whose document contains q,
// without regard to case), with the chain's verification.
func (cs *Console) receiptsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	data := &receiptsData{base: cs.pageBase(w, r, v, "Receipts", "receipts", nil), Query: q}
	rep, err := cs.op.VerifyChain(r.Context(), nil)
	if err != nil {
		data.ChainErr = err.Error()
	}
	data.Chain = rep
	lq := strings.ToLower(q)
	var rows []receiptRow
	for rc, err := range cs.op.Receipts(r.Context(), store.ReceiptFilter{}) {
		if err != nil {
			cs.fail(w, r, v, http.StatusServiceUnavailable, "The receipts could not be read: "+err.Error())
			return
		}
		if lq != "" && !strings.Contains(strings.ToLower(string(rc.View.Receipt)), lq) {
			continue
		}
		rows = append(rows, newReceiptRow(rc))
		if len(rows) > 4*receiptsShown {
			rows = slices.Clone(rows[len(rows)-receiptsShown-1:])
		}
	}
	if len(rows) > receiptsShown {
		data.More = true
		rows = rows[len(rows)-receiptsShown:]
	}
	slices.Reverse(rows)
	data.Rows = rows
	cs.render(w, http.StatusOK, "receipts", data)
}

type receiptData struct {
	base
	Row     receiptRow
	Doc     string
	Breaks  []jsonview.Break
	Checked bool
}

// receiptPage is GET /receipts/{seq}: one receipt's document, and whether the chain breaks there.
func (cs *Console) receiptPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || seq < 1 {
		cs.fail(w, r, v, http.StatusNotFound, "A receipt is named by its seq, a positive integer.")
		return
	}
	for rc, err := range cs.op.Receipts(r.Context(), store.ReceiptFilter{AfterSeq: seq - 1}) {
		if err != nil {
			cs.fail(w, r, v, http.StatusServiceUnavailable, "The receipt could not be read: "+err.Error())
			return
		}
		if rc.View.Seq != seq {
			break
		}
		data := &receiptData{base: cs.pageBase(w, r, v, fmt.Sprintf("Receipt %d", seq), "receipts", nil), Row: newReceiptRow(rc), Doc: prettyJSON(rc.View.Receipt)}
		if rep, err := cs.op.VerifyChain(r.Context(), nil); err == nil {
			data.Checked = true
			for _, b := range rep.Breaks {
				if b.Seq == seq {
					data.Breaks = append(data.Breaks, b)
				}
			}
		}
		cs.render(w, http.StatusOK, "receipt", data)
		return
	}
	cs.fail(w, r, v, http.StatusNotFound, fmt.Sprintf("There is no receipt %d.", seq))
}

type budgetsData struct {
	base
	Budgets []budgetView
}

// budgetView is one budget as the Budgets page draws it: its bar (Consumed of Limit), and each
// charge it holds with why.
type budgetView struct {
	jsonview.Budget
	Percent string // the ratio as a percentage, for the words beside the bar
	Of      string // what it belongs to, in words
	High    int64  // where the bar turns to a warning: 80% of the limit
}

// budgetsPage is GET /budgets: every budget in force (operator.Budgets), as a bar of what it
// has consumed of its limit, with the charges it holds and why each is held.
func (cs *Console) budgetsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	list, err := cs.op.Budgets(r.Context())
	if err != nil {
		cs.fail(w, r, v, http.StatusServiceUnavailable, "The budgets could not be read: "+err.Error())
		return
	}
	data := &budgetsData{base: cs.pageBase(w, r, v, "Budgets", "budgets", nil)}
	for _, b := range list {
		bv := budgetView{Budget: b, Percent: strconv.FormatFloat(100*b.Ratio, 'f', 0, 64) + "%", High: b.Limit * 8 / 10, Of: b.Kind}
		if b.Kind == jsonview.BudgetOfAction {
			bv.Of = "action " + deref(b.Action) + ", per " + deref(b.Per) + " " + deref(b.Who)
		}
		data.Budgets = append(data.Budgets, bv)
	}
	cs.render(w, http.StatusOK, "budgets", data)
}

type coverageData struct {
	base
	Coverage  jsonview.Coverage
	Since     string                    // as the person typed it
	Templates []jsonview.CoverageAction // the actions whose effect template never produced a key
}

// coveragePage is GET /coverage[?since=T]: which rules of the policy decided the recorded calls,
// and what never fired (operator.Coverage).
func (cs *Console) coveragePage(w http.ResponseWriter, r *http.Request, v *viewer) {
	since := r.URL.Query().Get("since")
	var from time.Time
	if since != "" {
		t, err := operator.ParseSince(since, cs.cfg.Now())
		if err != nil {
			cs.fail(w, r, v, http.StatusBadRequest, "The window could not be read: "+err.Error())
			return
		}
		from = t
	}
	c, err := cs.op.Coverage(r.Context(), from)
	if err != nil {
		cs.fail(w, r, v, http.StatusServiceUnavailable, "The coverage could not be read: "+err.Error())
		return
	}
	data := &coverageData{base: cs.pageBase(w, r, v, "Coverage", "coverage", nil), Coverage: c, Since: since}
	for _, a := range c.Actions {
		if a.Effect != nil && a.EffectKeys == 0 {
			data.Templates = append(data.Templates, a)
		}
	}
	cs.render(w, http.StatusOK, "coverage", data)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

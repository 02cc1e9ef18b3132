// Package metrics counts what latch does, in Prometheus form: a Sink a Go program registers
// with its guard (latch.Config.Sinks), which `latch serve` registers too and serves at
// /metrics. In process and over HTTP the counters are the same ones, counted by the same code.
//
//	m, err := metrics.New(nil)
//	g, err := latch.Open(ctx, &latch.Config{Sinks: []latch.Sink{m}})
//	m.UseStore(g.Store())                 // the gauges of effects and approvals by state
//	m.UsePolicy(g.Policy())               // action labels: only the names the policy lists
//	http.Handle("/metrics", m.Handler())  // or register m.Registry() with your own
//
// The Sink is a latch.Observer as well: the guard tells it how each call ended and how long each
// store write took, synchronously and without blocking. Receipts and events reach it like any
// sink's, after they are committed. Labels carry action names, results, reason words, event
// causes and store operations — never arguments, effect keys, ids or principals.
//
// An action name comes from the caller — over HTTP, from whoever can reach the API — and
// /metrics is usually served without authentication, so no label may take a value per made-up
// name: each new label value is a series Prometheus keeps. With a policy (Config.Policy or
// UsePolicy), the action label takes the names it lists and LabelUnlisted for any other;
// without one, the first MaxLabelValues distinct names and LabelOther after them. Reason words
// and event causes take snake_case words only, at most MaxLabelValues of each, and LabelOther
// otherwise. Every metric is listed in docs/observability.md.
package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// Label values that stand for many.
const (
	// LabelUnlisted is the action label of every call whose action the policy does not list.
	LabelUnlisted = "(unlisted)"
	// LabelOther is the value of a label past MaxLabelValues distinct values, or not shaped
	// like one (a reason word or a cause that is not snake_case).
	LabelOther = "(other)"
)

// MaxLabelValues bounds the distinct values one label takes (beside LabelUnlisted and
// LabelOther) where no policy bounds them.
const MaxLabelValues = 256

// Config configures a Sink. The zero value (or nil) counts into a new registry of its own.
type Config struct {
	// Registry receives the metrics; nil means a new one (Sink.Registry returns it). Give the
	// program's own registry to serve latch's metrics beside its others.
	Registry *prometheus.Registry
	// Store, when set, is read at each scrape for the gauges of effects by state and approvals
	// by status (a store.Counter: one grouped count each), and for the time an answered
	// approval waited. UseStore sets it later.
	Store store.Store
	// CountTimeout bounds the scrape-time count; default 5s.
	CountTimeout time.Duration
	// Policy, when set, is the one the guard decides by: the action label takes only the names
	// it lists (LabelUnlisted for any other). UsePolicy sets it later.
	Policy *policy.Policy
}

// Sink is the metrics sink. It implements latch.Sink and latch.Observer, and is safe for
// concurrent use.
type Sink struct {
	reg     *prometheus.Registry
	timeout time.Duration

	mu sync.RWMutex
	st store.Store
	// pol, when set, lists the action names that are labels; labels bounds the rest.
	pol    *policy.Policy
	labels map[string]map[string]bool // label name → values seen, for the labels no policy bounds

	calls        *prometheus.CounterVec
	refusals     *prometheus.CounterVec
	requested    prometheus.Counter
	answered     *prometheus.CounterVec
	expired      prometheus.Counter
	answerTime   prometheus.Histogram
	ambiguous    *prometheus.CounterVec
	lapsed       prometheus.Counter
	conflicts    prometheus.Counter
	resolved     *prometheus.CounterVec
	storeTx      *prometheus.HistogramVec
	storeErrors  *prometheus.CounterVec
	sinkFailures *prometheus.CounterVec
	notifyFailed *prometheus.CounterVec
	effects      *prometheus.Desc
	approvals    *prometheus.Desc
	countErrors  prometheus.Counter
	budgets      *budgetGauge

	// requestedAt remembers when requests this process saw were made, for the answer time when
	// no store is given; bounded.
	requestedAt map[string]time.Time
}

var (
	_ latch.Sink     = (*Sink)(nil)
	_ latch.Observer = (*Sink)(nil)
)

// maxRemembered bounds requestedAt.
const maxRemembered = 10000

// New builds a Sink and registers its metrics.
func New(cfg *Config) (*Sink, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.CountTimeout == 0 {
		c.CountTimeout = 5 * time.Second
	}
	if c.CountTimeout < 0 {
		return nil, errors.New("metrics: negative count timeout")
	}
	s := &Sink{reg: c.Registry, timeout: c.CountTimeout, st: c.Store, pol: c.Policy, requestedAt: map[string]time.Time{},
		labels: map[string]map[string]bool{}, budgets: newBudgetGauge()}
	s.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latch_calls_total",
		Help: "Calls that ended, by action and result (committed, failed, ambiguous, observed, denied, blocked, approval_required, error)."},
		[]string{"action", "result"})
	s.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latch_refusals_total",
		Help: "Denied and blocked calls, by action and reason word."}, []string{"action", "reason"})
	s.requested = prometheus.NewCounter(prometheus.CounterOpts{Name: "latch_approvals_requested_total",
		Help: "Approval requests stored."})
	s.answered = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latch_approvals_answered_total",
		Help: "Approval requests answered, by answer (granted, denied)."}, []string{"answer"})
	s.expired = prometheus.NewCounter(prometheus.CounterOpts{Name: "latch_approvals_expired_total",
		Help: "Approval requests written expired (found expired when answered or presented, or swept)."})
	s.answerTime = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "latch_approval_answer_seconds",
		Help:    "Time from an approval request to its answer.",
		Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 4 * 3600, 24 * 3600}})
	s.ambiguous = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latch_ambiguous_total",
		Help: "Effects written ambiguous, by cause (executor: the outcome was unknown; lease_expired: a lease lapsed; key_lost)."},
		[]string{"cause"})
	s.lapsed = prometheus.NewCounter(prometheus.CounterOpts{Name: "latch_leases_lapsed_total",
		Help: "Leases that lapsed with no outcome, written ambiguous by a contender, a resolution or the sweeper."})
	s.conflicts = prometheus.NewCounter(prometheus.CounterOpts{Name: "latch_outcome_conflicts_total",
		Help: "Holders' outcomes that contradicted the resolution of their attempt."})
	s.resolved = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latch_effects_resolved_total",
		Help: "Ambiguous effects resolved, by target state."}, []string{"to"})
	s.storeTx = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "latch_store_transaction_seconds",
		Help:    "Duration of the pipeline's store write transactions, by operation.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}, []string{"op"})
	s.storeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latch_store_errors_total",
		Help: "Store write transactions that failed (not refusals the store decided), by operation."}, []string{"op"})
	s.sinkFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latch_sink_failures_total",
		Help: "Sink deliveries that failed, by sink type and kind (error, panic, dropped)."}, []string{"sink", "kind"})
	s.notifyFailed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latch_notify_failures_total",
		Help: "Alert deliveries given up, by kind (failed: every retry failed; dropped: the queue was full)."}, []string{"kind"})
	s.countErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "latch_store_count_errors_total",
		Help: "Scrapes whose count of effects and approvals failed."})
	s.effects = prometheus.NewDesc("latch_effects", "Effect records by state, read from the store at scrape.", []string{"state"}, nil)
	s.approvals = prometheus.NewDesc("latch_approvals", "Approval requests by status, read from the store at scrape.", []string{"status"}, nil)
	for _, col := range []prometheus.Collector{s.calls, s.refusals, s.requested, s.answered, s.expired, s.answerTime,
		s.ambiguous, s.lapsed, s.conflicts, s.resolved, s.storeTx, s.storeErrors, s.sinkFailures, s.notifyFailed,
		s.countErrors, gauges{s}, s.budgets} {
		if err := s.reg.Register(col); err != nil {
			return nil, errors.Join(errors.New("metrics: register"), err)
		}
	}
	return s, nil
}

// Registry returns the registry the metrics are in.
func (s *Sink) Registry() *prometheus.Registry { return s.reg }

// Handler serves the registry in the Prometheus text format (or OpenMetrics, when asked).
func (s *Sink) Handler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// UseStore sets the store read for the gauges and answer times: for a sink built before its
// guard opened the store (latch.Guard.Store).
func (s *Sink) UseStore(st store.Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st = st
}

// UsePolicy sets the policy whose action names the action label may take (Config.Policy): for
// a sink built before its guard opened (latch.Guard.Policy). Series already counted stay.
func (s *Sink) UsePolicy(p *policy.Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pol = p
}

// action is the action label of a call to name.
func (s *Sink) action(name string) string {
	s.mu.RLock()
	pol := s.pol
	s.mu.RUnlock()
	if pol == nil {
		return s.bounded("action", name, utf8.ValidString(name) && name != "")
	}
	if _, ok := pol.Actions[name]; ok {
		return name
	}
	return LabelUnlisted
}

// word is the label value of a reason word or an event cause: a snake_case word, one of at most
// MaxLabelValues, or LabelOther.
func (s *Sink) word(label, w string) string {
	return s.bounded(label, w, snakeCase(w))
}

// bounded returns v when ok and v is one of the first MaxLabelValues values label took, and
// LabelOther otherwise.
func (s *Sink) bounded(label, v string, ok bool) string {
	if !ok {
		return LabelOther
	}
	s.mu.RLock()
	seen := s.labels[label][v]
	s.mu.RUnlock()
	if seen {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vals := s.labels[label]
	if vals == nil {
		vals = map[string]bool{}
		s.labels[label] = vals
	}
	if !vals[v] && len(vals) >= MaxLabelValues {
		return LabelOther
	}
	vals[v] = true
	return v
}

// snakeCase reports whether w is a word of at most 64 lower-case letters, digits and
// underscores, starting with a letter: the shape of every reason word and cause latch writes.
func snakeCase(w string) bool {
	if w == "" || len(w) > 64 || w[0] < 'a' || w[0] > 'z' {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

func (s *Sink) store() store.Store {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.st
}

// CallEnded counts a call (latch.Observer).
func (s *Sink) CallEnded(action, result, reason string) {
	a := s.action(action)
	s.calls.WithLabelValues(a, s.word("result", result)).Inc()
	if reason != "" {
		// A reason is one of latch's words (latch.Reason): anything else is LabelOther.
		s.refusals.WithLabelValues(a, s.bounded("reason", reason, latch.Reason(reason).Kind() != "")).Inc()
	}
}

// StoreTransaction observes a store write's duration (latch.Observer).
func (s *Sink) StoreTransaction(op string, d time.Duration, err error) {
	s.storeTx.WithLabelValues(op).Observe(d.Seconds())
	if err != nil && !decided(err) {
		s.storeErrors.WithLabelValues(op).Inc()
	}
}

// decided reports whether err is a refusal the store decided, not a failure.
func decided(err error) bool {
	for _, e := range []error{store.ErrLeaseLost, store.ErrNotAmbiguous, store.ErrAnswerRefused, store.ErrNotFound,
		store.ErrHolderMayAct, store.ErrNothingToSweep, store.ErrInvalidInput, store.ErrResolveRefused,
		store.ErrRequestKeyMismatch} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// SinkFailed counts a failed sink delivery (latch.Observer).
func (s *Sink) SinkFailed(sink, what string) {
	s.sinkFailures.WithLabelValues(sink, what).Inc()
}

// DeliveryFailed counts an alert the notifier gave up (kind failed) or dropped (kind dropped).
func (s *Sink) DeliveryFailed(kind string) {
	s.notifyFailed.WithLabelValues(kind).Inc()
}

// Receipt does nothing: calls are counted when they end (CallEnded).
func (s *Sink) Receipt(context.Context, *latch.Receipt) error { return nil }

// Event counts what the event says happened.
func (s *Sink) Event(ctx context.Context, e store.Event) error {
	var p struct {
		Cause  string `json:"cause"`
		Reason string `json:"reason"`
		To     string `json:"to"`
	}
	switch e.Kind {
	case store.EventApprovalInvalidated, store.EventExecutionAmbiguous, store.EventEffectResolved:
		// Only these kinds are counted by their payload: the others (several a call) are not
		// decoded at all.
		if len(e.Payload) > 0 {
			_ = json.Unmarshal(e.Payload, &p) // a payload that does not decode counts without its labels
		}
	}
	switch e.Kind {
	case store.EventApprovalRequested:
		s.requested.Inc()
		s.remember(e.ApprovalID, e.Time)
	case store.EventApprovalGranted, store.EventApprovalDenied:
		answer := "granted"
		if e.Kind == store.EventApprovalDenied {
			answer = "denied"
		}
		s.answered.WithLabelValues(answer).Inc()
		if d, ok := s.waited(ctx, e); ok {
			s.answerTime.Observe(d.Seconds())
		}
	case store.EventApprovalInvalidated:
		if p.Reason == "expired" {
			s.expired.Inc()
		}
		s.forget(e.ApprovalID)
	case store.EventExecutionAmbiguous:
		cause := p.Cause
		if cause == "" {
			cause = "executor"
		}
		s.ambiguous.WithLabelValues(s.word("cause", cause)).Inc()
		if cause == "lease_expired" {
			s.lapsed.Inc()
		}
	case store.EventOutcomeConflict:
		s.conflicts.Inc()
	case store.EventEffectResolved:
		if p.To != "" {
			s.resolved.WithLabelValues(s.word("to", p.To)).Inc()
		}
	}
	return nil
}

func (s *Sink) remember(id string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requestedAt) >= maxRemembered {
		for k := range s.requestedAt { // drop one at random: a bound, not a cache policy
			delete(s.requestedAt, k)
			break
		}
	}
	s.requestedAt[id] = at
}

func (s *Sink) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requestedAt, id)
}

// waited is how long the request answered by e waited: from the store when the sink has one
// (the request may have been made by another process), else from the request this sink saw.
func (s *Sink) waited(ctx context.Context, e store.Event) (time.Duration, bool) {
	s.mu.Lock()
	at, seen := s.requestedAt[e.ApprovalID]
	delete(s.requestedAt, e.ApprovalID)
	st := s.st
	s.mu.Unlock()
	if st != nil {
		if a, err := st.Approval(ctx, e.ApprovalID); err == nil && !a.AnsweredAt.IsZero() {
			return a.AnsweredAt.Sub(a.CreatedAt), true
		}
	}
	if seen {
		return e.Time.Sub(at), true
	}
	return 0, false
}

// gauges collects the counts of effects and approvals from the store at scrape.
type gauges struct{ s *Sink }

func (g gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.s.effects
	ch <- g.s.approvals
}

func (g gauges) Collect(ch chan<- prometheus.Metric) {
	ct, ok := g.s.store().(store.Counter)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.s.timeout)
	defer cancel()
	c, err := ct.Counts(ctx)
	if err != nil {
		g.s.countErrors.Inc()
		return
	}
	for _, st := range []store.State{store.Executing, store.Committed, store.Failed, store.Ambiguous} {
		ch <- prometheus.MustNewConstMetric(g.s.effects, prometheus.GaugeValue, float64(c.Effects[st]), string(st))
	}
	for _, st := range []store.ApprovalStatus{store.Pending, store.Granted, store.Denied, store.Expired, store.Consumed} {
		ch <- prometheus.MustNewConstMetric(g.s.approvals, prometheus.GaugeValue, float64(c.Approvals[st]), string(st))
	}
}

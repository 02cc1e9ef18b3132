package server

import (
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/propagation"
)

// route is one operation of the API. The table is the single list of what the server serves:
// the mux is built from it, and the OpenAPI document is tested against it.
type route struct {
	method, pattern string
	auth            bool // needs a bearer credential
	h               func(http.ResponseWriter, *http.Request, *caller)
}

func (s *Server) table() []route {
	open := func(h http.HandlerFunc) func(http.ResponseWriter, *http.Request, *caller) {
		return func(w http.ResponseWriter, r *http.Request, _ *caller) { h(w, r) }
	}
	return []route{
		{"GET", "/healthz", false, open(s.healthz)},
		{"GET", "/readyz", false, open(s.readyz)},
		{"GET", "/v1/openapi.json", false, open(s.openAPIDoc)},
		{"GET", "/metrics", false, open(s.cfg.Metrics.Handler().ServeHTTP)},
		{"POST", "/v1/actions", true, s.postAction},
		{"GET", "/v1/actions/{id}", true, s.getAction},
		{"POST", "/v1/actions/{id}/outcome", true, s.postOutcome},
		{"POST", "/v1/actions/{id}/lease", true, s.postLease},
		{"POST", "/v1/actions/{id}/suspend", true, s.postSuspend},
		{"POST", "/v1/actions/{id}/resume", true, s.postResume},
		{"GET", "/v1/approvals", true, s.listApprovals},
		{"GET", "/v1/approvals/{id}", true, s.getApproval},
		{"POST", "/v1/approvals/{id}/approve", true, s.answer(true)},
		{"POST", "/v1/approvals/{id}/deny", true, s.answer(false)},
		{"GET", "/v1/standing", true, s.listStanding},
		{"GET", "/v1/standing/{id}", true, s.getStanding},
		{"POST", "/v1/standing/{id}/revoke", true, s.revokeStanding},
		{"GET", "/v1/effects", true, s.listEffects},
		{"GET", "/v1/effects/{key}", true, s.getEffect},
		{"POST", "/v1/effects/{key}/resolve", true, s.resolve},
		{"POST", "/v1/break-glass", true, s.breakGlass},
		{"POST", "/v1/hops", true, s.postHop},
		{"GET", "/v1/hops/{id}", true, s.getHop},
		{"GET", "/v1/receipts", true, s.listReceipts},
		{"GET", "/v1/receipts/verify", true, s.verifyReceipts},
		{"GET", "/v1/events", true, s.events},
		{"GET", "/v1/stats", true, s.stats},
		{"GET", "/v1/coverage", true, s.coverage},
		{"GET", "/v1/budgets", true, s.listBudgets},
		{"POST", "/v1/revocations", false, open(s.pushRevocations)},
		{"POST", "/v1/slack/interactions", false, open(s.slackInteraction)},
	}
}

// routes builds the handler: the table's routes, each authenticated when it says so, and a
// problem document for every path or method the table does not serve.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	methods := map[string][]string{}
	for _, rt := range s.table() {
		rt := rt
		// The two requests of every call take an API token verified before from memory, and
		// confirm it in the transactions that reserve and record (confirmWriter).
		hot := rt.method == http.MethodPost && (rt.pattern == "/v1/actions" || rt.pattern == "/v1/actions/{id}/outcome")
		mux.HandleFunc(rt.method+" "+rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			// A caller's W3C traceparent makes the pipeline's spans children of its own. Without
			// one there is nothing to extract, and the request is not copied for it.
			if _, ok := r.Header["Traceparent"]; ok {
				r = r.WithContext(propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
			}
			var c *caller
			if rt.auth {
				var p *Problem
				if c, p = s.authenticateAs(r, hot); p != nil {
					writeProblem(w, p)
					return
				}
				if c.check != nil {
					w = &confirmWriter{ResponseWriter: w, s: s, r: r, c: c}
				}
			}
			rt.h(w, r, c)
		})
		methods[rt.pattern] = append(methods[rt.pattern], rt.method)
	}
	if s.con != nil {
		for _, p := range s.con.Routes() {
			mux.Handle(p, s.con)
		}
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// The mux sends here what no route matched: a known path with another method, or an
		// unknown path.
		for _, rt := range s.table() {
			probe, _ := http.NewRequest(rt.method, r.URL.String(), nil)
			if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
				allowed := methods[strings.TrimPrefix(pattern, rt.method+" ")]
				w.Header().Set("Allow", strings.Join(allowed, ", "))
				writeProblem(w, problem(http.StatusMethodNotAllowed, "method_not_allowed",
					fmt.Sprintf("%s %s: allowed %s", r.Method, r.URL.Path, strings.Join(allowed, ", "))))
				return
			}
		}
		writeProblem(w, problem(http.StatusNotFound, "not_found", "no route "+r.URL.Path+": see /v1/openapi.json"))
	})
	return s.recoverer(mux)
}

// recoverer answers a panicking handler with a 500 problem instead of a dropped connection,
// and logs it once.
func (s *Server) recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("latch serve: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeProblem(w, problem(http.StatusInternalServerError, "internal", "the server failed while answering"))
			}
		}()
		h.ServeHTTP(w, r)
	})
}

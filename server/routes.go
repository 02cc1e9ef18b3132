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
	auth            authMode
	h               func(http.ResponseWriter, *http.Request, *caller)
	// duplex: the route answers while its body is still open (POST /v1/calls). Its answers,
	// a refusal of its credential too, go out without waiting for the body's end: an HTTP/1
	// server would otherwise read the body to its end first, and the caller is waiting for
	// the answer before it ends the body.
	duplex bool
}

// authMode is how a route authenticates its caller.
type authMode int

const (
	open      authMode = iota // no credential
	bearer                    // a bearer credential, read from the store on every request
	confirmed                 // a bearer credential; an API token verified before is taken from memory and confirmed by the request's writes (confirmWriter)
)

func (s *Server) table() []route {
	anon := func(h http.HandlerFunc) func(http.ResponseWriter, *http.Request, *caller) {
		return func(w http.ResponseWriter, r *http.Request, _ *caller) { h(w, r) }
	}
	return []route{
		{"GET", "/healthz", open, anon(s.healthz), false},
		{"GET", "/readyz", open, anon(s.readyz), false},
		{"GET", "/v1/openapi.json", open, anon(s.openAPIDoc), false},
		{"GET", "/metrics", open, anon(s.cfg.Metrics.Handler().ServeHTTP), false},
		{"POST", "/v1/actions", confirmed, s.postAction, false},
		{"GET", "/v1/actions/{id}", bearer, s.getAction, false},
		{"POST", "/v1/actions/{id}/outcome", confirmed, s.postOutcome, false},
		{"POST", "/v1/calls", confirmed, s.postCall, true},
		{"POST", "/v1/actions/{id}/lease", bearer, s.postLease, false},
		{"POST", "/v1/actions/{id}/suspend", bearer, s.postSuspend, false},
		{"POST", "/v1/actions/{id}/resume", bearer, s.postResume, false},
		{"GET", "/v1/approvals", bearer, s.listApprovals, false},
		{"GET", "/v1/approvals/{id}", bearer, s.getApproval, false},
		{"POST", "/v1/approvals/{id}/approve", bearer, s.answer(true), false},
		{"POST", "/v1/approvals/{id}/deny", bearer, s.answer(false), false},
		{"GET", "/v1/standing", bearer, s.listStanding, false},
		{"GET", "/v1/standing/{id}", bearer, s.getStanding, false},
		{"POST", "/v1/standing/{id}/revoke", bearer, s.revokeStanding, false},
		{"GET", "/v1/effects", bearer, s.listEffects, false},
		{"GET", "/v1/effects/{key}", bearer, s.getEffect, false},
		{"POST", "/v1/effects/{key}/resolve", bearer, s.resolve, false},
		{"POST", "/v1/break-glass", bearer, s.breakGlass, false},
		{"POST", "/v1/hops", bearer, s.postHop, false},
		{"GET", "/v1/hops/{id}", bearer, s.getHop, false},
		{"GET", "/v1/receipts", bearer, s.listReceipts, false},
		{"GET", "/v1/receipts/verify", bearer, s.verifyReceipts, false},
		{"GET", "/v1/events", bearer, s.events, false},
		{"GET", "/v1/stats", bearer, s.stats, false},
		{"GET", "/v1/coverage", bearer, s.coverage, false},
		{"GET", "/v1/budgets", bearer, s.listBudgets, false},
		{"POST", "/v1/revocations", open, anon(s.pushRevocations), false},
		{"POST", "/v1/slack/interactions", open, anon(s.slackInteraction), false},
	}
}

// routes builds the handler: the table's routes, each authenticated when it says so, and a
// problem document for every path or method the table does not serve.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	methods := map[string][]string{}
	for _, rt := range s.table() {
		rt := rt
		mux.HandleFunc(rt.method+" "+rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			// A caller's W3C traceparent makes the pipeline's spans children of its own. Without
			// one there is nothing to extract, and the request is not copied for it.
			if _, ok := r.Header["Traceparent"]; ok {
				r = r.WithContext(propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
			}
			if rt.duplex {
				if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
					writeProblem(w, problem(http.StatusInternalServerError, "internal", "this server cannot answer while the request body is still open: use POST /v1/actions and its outcome"))
					return
				}
				if r.ProtoMajor == 1 {
					// An answer that ends the exchange early leaves the body open: the
					// connection is not reused (net/http would read the rest of the body
					// after the handler, and a read reaching its end there races the next
					// request's: golang/go#68560). The streamed answer takes this back.
					w.Header().Set("Connection", "close")
				}
			}
			var c *caller
			if rt.auth != open {
				var p *Problem
				if c, p = s.authenticateAs(r, rt.auth == confirmed); p != nil {
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

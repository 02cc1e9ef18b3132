package server_test

import (
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"
)

// GET /v1/effects answers a page at a time, in key order: at most limit effects (100 unless
// asked) after the key after, and where the next page starts. A page of what needs a person
// skips the executing effects whose leases are live, reading on until the page is full, so that
// no page comes back short while more follow. A limit or an after the route cannot serve is
// refused naming the parameter.
func TestEffectPages(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, nil)
			ids := map[string]string{}
			for i := 1; i <= 5; i++ {
				inv := fmt.Sprintf("inv_%d", i)
				r := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge",
					"arguments": map[string]any{"invoice_id": inv, "amount": 100}})
				if r.status != 200 || r.body["status"] != "reserved" {
					t.Fatalf("begin %s = %d %s", inv, r.status, r.raw)
				}
				ids[inv] = r.body["action_id"].(string)
			}
			for inv, outcome := range map[string]string{"inv_1": "committed", "inv_2": "committed", "inv_3": "unknown"} {
				body := map[string]any{"outcome": outcome}
				if outcome == "unknown" {
					body["error"] = "timeout"
				}
				if o := s.do("POST", "/v1/actions/"+ids[inv]+"/outcome", s.alice, body); o.status != 200 {
					t.Fatalf("outcome of %s = %d %s", inv, o.status, o.raw)
				}
			}
			// pages walks the pages of query, limit at a time, and returns each page's keys.
			pages := func(query string, limit int) [][]string {
				t.Helper()
				var out [][]string
				after := ""
				for range 10 {
					r := s.do("GET", fmt.Sprintf("/v1/effects?%s&limit=%d&after=%s", query, limit, url.QueryEscape(after)), s.approver, nil)
					if r.status != 200 {
						t.Fatalf("GET effects %s after %q = %d %s", query, after, r.status, r.raw)
					}
					var keys []string
					for _, e := range r.body["effects"].([]any) {
						keys = append(keys, e.(map[string]any)["effect_key"].(string))
					}
					out = append(out, keys)
					next := r.body["next_after"].(string)
					if next == "" {
						return out
					}
					if len(keys) != limit || next != keys[len(keys)-1] {
						t.Fatalf("page %v of %s says the next starts after %q", keys, query, next)
					}
					after = next
				}
				t.Fatalf("more than 10 pages of %s", query)
				return nil
			}
			want := func(what string, got, want [][]string) {
				t.Helper()
				if !slices.EqualFunc(got, want, slices.Equal[[]string]) {
					t.Errorf("%s: pages %v, want %v", what, got, want)
				}
			}
			want("all, 2 a page", pages("state=all", 2), [][]string{{"charge:inv_1", "charge:inv_2"}, {"charge:inv_3", "charge:inv_4"}, {"charge:inv_5"}})
			want("all, 5 a page", pages("state=all", 5), [][]string{{"charge:inv_1", "charge:inv_2", "charge:inv_3", "charge:inv_4", "charge:inv_5"}})
			want("committed", pages("state=committed", 1), [][]string{{"charge:inv_1"}, {"charge:inv_2"}})
			want("executing", pages("state=executing", 1), [][]string{{"charge:inv_4"}, {"charge:inv_5"}})
			// inv_4 and inv_5 run under live leases: only inv_3 needs a person, in one last page.
			want("needs a person, leases live", pages("state=needs_person", 1), [][]string{{"charge:inv_3"}})
			s.clock.Add(24 * time.Hour) // every lease lapsed
			want("needs a person, leases lapsed", pages("state=needs_person", 2), [][]string{{"charge:inv_3", "charge:inv_4"}, {"charge:inv_5"}})
			if r := s.do("GET", "/v1/effects?state=all", s.approver, nil); r.status != 200 || len(r.body["effects"].([]any)) != 5 || r.body["next_after"] != "" {
				t.Errorf("GET effects with no limit = %d %s; want all 5 in a page of up to 100", r.status, r.raw)
			}
			for _, q := range []string{"limit=0", "limit=1001", "limit=x", "after=" + url.QueryEscape("k\x00")} {
				p := s.do("GET", "/v1/effects?state=all&"+q, s.approver, nil)
				wantProblem(t, "GET effects "+q, p, 400, "invalid_query")
			}
		})
	}
}

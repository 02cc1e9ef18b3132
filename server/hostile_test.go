package server_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/internal/hostile"
	"github.com/latchkit/latch/store"
)

// anyKeyPolicy makes the effect key exactly what the agent sends: the threat tests give it the
// shapes of hostile.Keys.
const anyKeyPolicy = `
schema: latch.policy/v1
actions:
  any.call:
    effect: "{key}"
    arguments:
      key: { type: string }
    decision: allow
`

// ambiguousOver begins any.call of key as the agent and reports its outcome unknown, so that the
// effect key is left ambiguous; ok is false when the begin is refused (the problem is checked
// to say what is wrong with the key).
func (s *srv) ambiguousOver(key string) (ok bool) {
	s.t.Helper()
	r := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "any.call", "arguments": map[string]any{"key": key}})
	if r.status != http.StatusOK {
		if (r.status != http.StatusBadRequest && r.status != http.StatusUnprocessableEntity) || r.header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(fmt.Sprint(r.body["detail"]), "effect key") {
			s.t.Errorf("begin of key %.40q = %d %.600s, want 200, or a 400 or 422 problem saying what is wrong with the key", key, r.status, r.raw)
		}
		return false
	}
	id, _ := r.body["action_id"].(string)
	if o := s.do("POST", "/v1/actions/"+id+"/outcome", s.alice, map[string]any{"outcome": "unknown", "error": "connection reset"}); o.status != http.StatusOK {
		s.t.Fatalf("outcome of key %q = %d %s", key, o.status, o.raw)
	}
	return true
}

// TestHostileKeysOverHTTP: every key shape an agent can send (hostile.Keys), left ambiguous, is
// read and resolved by a client that percent-encodes the key as one path segment: each request
// reaches exactly its own effect — the answer names it, byte for byte — and a resolution
// settles it and nothing else. The plain key "pay:inv88", which the decoys percent-decode,
// path-clean or read as, stays ambiguous until its own turn comes last.
func TestHostileKeysOverHTTP(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := startWith(t, backend, anyKeyPolicy, nil)
			const victim = "pay:inv88"
			var keys []string
			for _, k := range hostile.Keys {
				if s.ambiguousOver(k.Value) {
					keys = append(keys, k.Value)
				} else if len(k.Value) <= store.MaxText {
					t.Errorf("key %s (%q) was refused though the store keeps it", k.Name, k.Value)
				}
			}
			states := func() map[string]string {
				out := map[string]string{}
				for _, k := range keys {
					e, err := s.g.Store().Effect(t.Context(), k)
					if err != nil {
						t.Fatalf("Effect(%q): %v", k, err)
					}
					out[k] = string(e.State)
				}
				return out
			}
			order := []string{}
			for _, k := range keys {
				if k != victim {
					order = append(order, k)
				}
			}
			order = append(order, victim)
			for _, k := range order {
				path := "/v1/effects/" + url.PathEscape(k)
				if r := s.do("GET", path, s.approver, nil); r.status != http.StatusOK || r.body["effect_key"] != k {
					t.Errorf("GET %s = %d, effect_key %q; want 200 naming %q", path, r.status, r.body["effect_key"], k)
				}
				before := states()
				r := s.do("POST", path+"/resolve", s.approver, map[string]any{"to": "failed", "note": "checked: nothing happened"})
				if r.status != http.StatusOK || r.body["effect_key"] != k {
					t.Errorf("POST %s/resolve = %d %s; want 200 naming %q", path, r.status, r.raw, k)
				}
				after := states()
				for _, o := range keys {
					switch {
					case o == k && after[o] != string(store.Failed):
						t.Errorf("resolving %q left it %s", k, after[o])
					case o != k && after[o] != before[o]:
						t.Errorf("resolving %q changed ANOTHER effect %q: %s → %s", k, o, before[o], after[o])
					}
				}
			}
			// A key no agent sent is not found, however close to one it reads.
			for _, k := range []string{"pay:inv88 ", "pay:inv888", "PAY:INV88"} {
				if r := s.do("GET", "/v1/effects/"+url.PathEscape(k), s.approver, nil); r.status != http.StatusNotFound {
					t.Errorf("GET of the unknown key %q = %d %s, want 404", k, r.status, r.raw)
				}
			}
		})
	}
}

// TestHostileBodiesOverHTTP: arguments nested thousands deep and a megabyte of arguments are
// refused with a problem that says what is wrong, or decided within the server's bounds — never
// a crash or a hang — and a refused one writes nothing. Each is answered within seconds: the
// strict member check once copied the JSON pointer of every level into the next, so a body
// nested 100,000 deep took the server seconds of CPU (quadratic in its depth) before being
// refused, and a megabyte of "[" would have been walked a million frames deep. The server
// answers the next request.
func TestHostileBodiesOverHTTP(t *testing.T) {
	t.Parallel()
	s := startWith(t, "sqlite", anyKeyPolicy, nil)
	big := `{"action":"any.call","arguments":{"key":"big","pad":"` + strings.Repeat("x", 1<<20) + `"}}`
	for _, c := range []struct {
		name string
		body string
		want int
	}{
		{"arguments nested 100,000 deep", `{"action":"any.call","arguments":{"key":"deep","n":` + hostile.DeepJSON(100000) + `}}`, http.StatusBadRequest},
		{"arguments nested 10,000 deep", `{"action":"any.call","arguments":{"key":"deep","n":` + hostile.DeepJSON(10000) + `}}`, http.StatusBadRequest},
		{"a body nested 100,000 deep", hostile.DeepJSON(100000), http.StatusBadRequest},
		{"arguments of a megabyte of [", `{"action":"any.call","arguments":{"key":"deep","n":` + strings.Repeat("[", 1<<20-100) + `}}`, http.StatusBadRequest},
		{"a megabyte of arguments, past --max-body", big, http.StatusRequestEntityTooLarge},
	} {
		before := s.footprint()
		t0 := time.Now()
		r := s.do("POST", "/v1/actions", s.alice, c.body)
		if d := time.Since(t0); d > 3*time.Second {
			t.Errorf("%s: answered in %v, want well within 3s", c.name, d)
		}
		if r.status != c.want || r.header.Get("Content-Type") != "application/problem+json" || r.body["detail"] == "" {
			t.Errorf("%s: %d %.300s, want a %d problem saying what is wrong", c.name, r.status, r.raw, c.want)
		}
		if after := s.footprint(); after != before {
			t.Errorf("%s: the refused begin wrote: %+v → %+v", c.name, before, after)
		}
	}
	// Just under the bound: decided, stored, and read back whole.
	under := strings.Repeat("y", (1<<20)-1024)
	r := s.do("POST", "/v1/actions", s.alice, fmt.Sprintf(`{"action":"any.call","arguments":{"key":"under","pad":%q}}`, under))
	if r.status != http.StatusOK || r.body["effect_key"] != "under" {
		t.Fatalf("a body just under --max-body = %d %.300s, want reserved", r.status, r.raw)
	}
	if e, err := s.g.Store().Effect(t.Context(), "under"); err != nil || !strings.Contains(string(e.Arguments), under) {
		t.Errorf("the stored arguments of the large call lost bytes: %v", err)
	}
	if r := s.do("GET", "/healthz", "", nil); r.status != http.StatusOK {
		t.Errorf("GET /healthz after the hostile bodies = %d", r.status)
	}
}

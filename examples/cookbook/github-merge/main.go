// Command github-merge merges a pull request through a GitHub-style API whose reply is lost,
// and shows that the agent cannot "fix" the situation with a force-push.
//
// The fake GitHub (an httptest server) merges the pull request, but the first reply never
// arrives. latch records the merge ambiguous. The agent, unsure, retries the merge — refused
// ambiguous before the API is called — and then reaches for a force-push of the branch, which
// the policy does not list: denied unknown_action. The remote saw one merge and no push.
//
// Unguarded (LATCH_EXAMPLE_UNGUARDED=1) the retry reaches GitHub, which answers 405 (already
// merged); the agent reads that as a failure and force-pushes: the recipe exits 1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
	"github.com/latchkit/latch/latchhttp"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  git.merge:
    effect: "merge:{repo}:{number}"
    resource: "pr:{repo}#{number}"
    arguments:
      repo: { type: string }
      number: { type: integer, min: 1 }
    decision: allow
`

// github is the fake remote: it counts merges and force-pushes.
type github struct {
	mu           sync.Mutex
	merged       map[string]bool
	merges       int
	forcePushes  int
	loseNextBody bool
}

func (g *github) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	switch {
	case r.Method == http.MethodPut && r.URL.Path == "/repos/acme/api/pulls/7/merge":
		if g.merged[r.URL.Path] {
			g.mu.Unlock()
			http.Error(w, `{"message":"Pull Request is not mergeable"}`, http.StatusMethodNotAllowed)
			return
		}
		g.merged[r.URL.Path] = true
		g.merges++
		lose := g.loseNextBody
		g.loseNextBody = false
		g.mu.Unlock()
		if lose {
			select { // merged; the answer comes after the client gave up
			case <-r.Context().Done():
			case <-time.After(time.Second):
			}
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"merged": true, "sha": "6dcb09b"})
	case r.Method == http.MethodPatch && r.URL.Path == "/repos/acme/api/git/refs/heads/feature":
		g.forcePushes++
		g.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"ref": "refs/heads/feature", "forced": true})
	default:
		g.mu.Unlock()
		http.NotFound(w, r)
	}
}

// PR names a pull request.
type PR struct {
	Repo   string `json:"repo"`
	Number int    `json:"number"`
}

func main() {
	recipe.Run("github-merge", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		gh := &github{merged: map[string]bool{}, loseNextBody: true}
		srv := httptest.NewServer(gh)
		defer srv.Close()
		call := func(ctx context.Context, method, path string) (any, error) {
			ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, nil)
			if err != nil {
				return nil, latch.NotExecuted(err)
			}
			resp, err := latchhttp.Do(req)
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
			return resp.Status, nil
		}
		merge := latch.Protect(k.Guard, "git.merge", func(ctx context.Context, pr PR) (any, error) {
			return call(ctx, http.MethodPut, fmt.Sprintf("/repos/%s/pulls/%d/merge", pr.Repo, pr.Number))
		}, nil)
		forcePush := func(ctx context.Context) error {
			_, err := k.Guard.Execute(ctx, &latch.Call{Action: "git.force_push", Arguments: json.RawMessage(`{"repo":"acme/api","branch":"feature"}`)},
				func(ctx context.Context, _ json.RawMessage) (any, error) {
					return call(ctx, http.MethodPatch, "/repos/acme/api/git/refs/heads/feature")
				})
			return err
		}
		if k.Unguarded {
			merge = func(ctx context.Context, pr PR) (any, error) {
				return call(ctx, http.MethodPut, fmt.Sprintf("/repos/%s/pulls/%d/merge", pr.Repo, pr.Number))
			}
			forcePush = func(ctx context.Context) error {
				_, err := call(ctx, http.MethodPatch, "/repos/acme/api/git/refs/heads/feature")
				return err
			}
		}
		ctx = latch.WithPrincipal(ctx, latch.Principal{Agent: "merge-bot"})
		pr := PR{Repo: "acme/api", Number: 7}

		_, err := merge(ctx, pr)
		k.Say("merge acme/api#7: %v", err)
		k.Expect(k.Unguarded || errors.Is(err, latch.ErrAmbiguous), "the lost merge reply = %v, want an ambiguous outcome", err)
		_, err = merge(ctx, pr)
		k.Say("agent retries the merge: %v", err)
		k.Expect(k.Unguarded || recipe.Reason(err) == string(latch.ReasonAmbiguous), "the merge retry was refused %q, want ambiguous", recipe.Reason(err))
		if err != nil {
			// The agent does not know whether its branch landed; it tries to force it in.
			err := forcePush(ctx)
			k.Say("agent force-pushes feature: %v", err)
			if !k.Unguarded {
				k.Expect(recipe.Reason(err) == string(latch.ReasonUnknownAction), "the force-push was refused %q, want unknown_action", recipe.Reason(err))
			}
		}
		gh.mu.Lock()
		defer gh.mu.Unlock()
		k.Say("remote merges: %d, force pushes: %d", gh.merges, gh.forcePushes)
		k.Expect(gh.merges == 1, "the remote merged %d times, want once", gh.merges)
		k.Expect(gh.forcePushes == 0, "the remote took %d force-pushes, want none", gh.forcePushes)
		return nil
	})
}

package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/storeurl"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// policyPath is --policy, else $LATCH_POLICY, else ./latch.yaml. A given-but-empty --policy is
// a usage error; a set-but-empty $LATCH_POLICY is refused (docs/policy.md): it is almost always a
// broken deployment template, and guessing would read the wrong policy.
func (a *app) policyPath() (string, error) {
	if f := a.flags.Lookup("policy"); f != nil && f.Changed {
		if strings.TrimSpace(a.policyFlag) == "" {
			return "", usagef("--policy is empty")
		}
		return a.policyFlag, nil
	}
	return policy.LocateLookup(a.lookup)
}

// storeURL is --store, else $LATCH_STORE, else SQLite in .latch/ beside the policy.
func (a *app) storeURL() (string, error) {
	if f := a.flags.Lookup("store"); f != nil && f.Changed {
		if strings.TrimSpace(a.storeFlag) == "" {
			return "", usagef("--store is empty")
		}
		return a.storeFlag, nil
	}
	if v, ok := a.lookup("LATCH_STORE"); ok {
		if strings.TrimSpace(v) == "" {
			return "", errors.New("$LATCH_STORE is set but empty; unset it to use the store beside the policy")
		}
		return v, nil
	}
	path, err := a.policyPath()
	if err != nil {
		return "", err
	}
	return storeurl.Default(path, a.getenv), nil
}

// loadPolicy loads the policy and, for an observe-mode policy, prints the banner to stderr
// before anything else is printed.
func (a *app) loadPolicy() (*policy.Policy, error) {
	path, err := a.policyPath()
	if err != nil {
		return nil, err
	}
	p, err := policy.LoadContext(a.ctx, path)
	if err != nil {
		return nil, err
	}
	if p.Mode == policy.ModeObserve {
		fmt.Fprintln(a.stderr, observeBanner)
	}
	return p, nil
}

// redact hides a password in a store URL before it is printed.
func redact(u string) string { return store.Redact(u) }

// openRead opens the store read-only: it never creates or migrates anything, and a missing
// store is an error that says who creates it.
func (a *app) openRead() (store.Store, error) {
	u, err := a.storeURL()
	if err != nil {
		return nil, err
	}
	st, err := latch.OpenStore(a.ctx, u, &latch.StoreOptions{ReadOnly: true})
	if errors.Is(err, store.ErrNoStore) {
		return nil, fmt.Errorf("no latch store at %s: it is created by the first worker that opens a guard on it (latch.Open), never by a read command; point --store or $LATCH_STORE at the store your workers use", redact(u))
	}
	if err != nil {
		return nil, errors.New(reason(err)) // already "open store: …" or "open URL: …"
	}
	return st, nil
}

// openWrite opens an existing store for answering approvals and resolving effects. It does not
// create one: there is nothing to answer or resolve in a store that does not exist, and a typo
// in --store must not leave an empty database behind.
func (a *app) openWrite() (store.Store, error) {
	ro, err := a.openRead()
	if err != nil {
		return nil, err
	}
	if err := ro.Close(); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	u, _ := a.storeURL() // succeeded in openRead
	st, err := latch.OpenStore(a.ctx, u, nil)
	if err != nil {
		return nil, errors.New(reason(err))
	}
	return st, nil
}

// operatorPolicy lists no action: the guard of an operator command answers approvals and
// resolves effects, which need no policy, and can run nothing.
const operatorPolicy = "schema: latch.policy/v1\nactions: {}\n"

// openOperator opens the existing store (as openWrite) under a guard, so that an answer or a
// resolution takes the same path as Guard.Approve, Deny and Resolve in a program.
func (a *app) openOperator() (*latch.Guard, error) {
	st, err := a.openWrite()
	if err != nil {
		return nil, err
	}
	p, err := policy.Parse("operator", []byte(operatorPolicy))
	if err != nil {
		st.Close()
		return nil, err
	}
	g, err := latch.Open(a.ctx, &latch.Config{Policy: p, Store: st, Now: a.now})
	if err != nil {
		st.Close()
		return nil, err
	}
	return g, nil
}

// openAnswerer is openOperator for approve and deny: the guard holds the operator's policy, whose
// approvers decide who may answer a request and how many must (docs/approvals.md). A policy that
// cannot be read refuses the answer: without it, nobody can tell whether NAME may approve.
func (a *app) openAnswerer() (*latch.Guard, error) {
	st, err := a.openWrite()
	if err != nil {
		return nil, err
	}
	path, err := a.policyPath()
	if err != nil {
		st.Close()
		return nil, err
	}
	p, err := policy.LoadContext(a.ctx, path)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("%w (an answer is checked against the approvers of the policy: pass --policy FILE or set $LATCH_POLICY)", err)
	}
	g, err := latch.Open(a.ctx, &latch.Config{Policy: p, Store: st, Now: a.now})
	if err != nil {
		st.Close()
		return nil, err
	}
	return g, nil
}

// operator is who runs an operator command: --as, else $LATCH_APPROVER, else $USER. Nobody is a
// usage error: an answer or a resolution is evidence, and evidence names a person.
func (a *app) operator(as string, given bool) (string, error) {
	name := as
	if !given {
		if name = a.getenv("LATCH_APPROVER"); name == "" {
			name = a.getenv("USER")
		}
	}
	if strings.TrimSpace(name) == "" {
		return "", usagef("who is answering? pass --as NAME (or set $LATCH_APPROVER)")
	}
	if err := store.CheckApprover(name); err != nil {
		return "", usagef("--as: %v", err)
	}
	return name, nil
}

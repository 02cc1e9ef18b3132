// Package campaign is latch's reliability campaign: the crash matrix, the soak and the checker
// that judges what both leave behind.
//
// Every claim is checked from outside the store. An executor appends one line to an execution
// ledger (O_APPEND, fsync) before it returns, so the number of times an effect really ran is
// counted by the file system, not by the database under test. The checker then reads the store
// after the driver processes are gone and asks: did any effect key run more than once; is every
// key that ran committed or blocked (executing, ambiguous); did a committed key run exactly once;
// does the receipt chain verify; and — for the soak — can every blocked key be traced to a fault
// that was injected on purpose and written to the injection ledger?
//
// The drivers are real OS processes (the test binary re-executed in a child role) talking to
// real SQLite files and a real PostgreSQL server. The crash matrix SIGKILLs a driver at each step
// of the pipeline; the soak runs mixed load from several processes while faults are injected.
// The tests live behind the campaign build tag (scripts/crash.sh, scripts/soak.sh,
// scripts/test.sh); see docs/reliability.md.
package campaign

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// Actions of the campaign policy.
const (
	ActionPay       = "campaign.pay"       // allowed, effect pay:{key}
	ActionApproved  = "campaign.approved"  // needs a human, effect approved:{key}
	ActionForbidden = "campaign.forbidden" // denied
)

// policyText is the policy every campaign driver runs under.
const policyText = `schema: latch.policy/v1
version: campaign
actions:
  campaign.pay:
    effect: "pay:{key}"
    lease: 2s
    decision: allow
  campaign.approved:
    effect: "approved:{key}"
    lease: 2s
    decision: approve
  campaign.forbidden:
    effect: "forbidden:{key}"
    decision: deny
`

// Policy returns the parsed campaign policy.
func Policy() (*policy.Policy, error) {
	return policy.Parse("campaign.yaml", []byte(policyText))
}

// EffectKey is the effect key the campaign policy renders for action and the argument key.
func EffectKey(action, key string) string {
	switch action {
	case ActionApproved:
		return "approved:" + key
	case ActionForbidden:
		return "forbidden:" + key
	}
	return "pay:" + key
}

// Execution is one line of the execution ledger: one real run of an executor.
type Execution struct {
	Key   string `json:"key"`   // the effect key
	Token string `json:"token"` // the idempotency token of the attempt that ran
	PID   int    `json:"pid"`
	Time  int64  `json:"t"` // unix nanoseconds
}

// Ledger is an append-only JSON Lines file shared by many processes. Each entry is one write(2)
// on a file opened O_APPEND, so entries of concurrent writers never interleave; with Sync set,
// each append is fsynced before Append returns.
type Ledger struct {
	mu   sync.Mutex
	f    *os.File
	sync bool
}

// OpenLedger opens (creating if needed) the ledger at path. sync makes every append durable
// before it returns, as the execution ledger must be: it is the count the verdict rests on.
func OpenLedger(path string, sync bool) (*Ledger, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	return &Ledger{f: f, sync: sync}, nil
}

// Append writes v as one JSON line.
func (l *Ledger) Append(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("ledger append: %w", err)
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("ledger append: %w", err)
	}
	if l.sync {
		if err := l.f.Sync(); err != nil {
			return fmt.Errorf("ledger sync: %w", err)
		}
	}
	return nil
}

// Close closes the ledger file.
func (l *Ledger) Close() error { return l.f.Close() }

// readLines decodes every JSON line of path into a fresh T. A missing file is an empty ledger.
// A final line without its newline is a write cut short by a kill and is skipped; any other
// undecodable line is an error.
func readLines[T any](path string) ([]T, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []T
	r := bufio.NewReader(bytes.NewReader(data))
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return out, nil // a partial last line (no newline) was never completed
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, v)
	}
}

// ReadExecutions reads the execution ledger at path.
func ReadExecutions(path string) ([]Execution, error) {
	return readLines[Execution](path)
}

// openGuard opens a guard on the campaign policy over st (which it takes over).
func openGuard(ctx context.Context, st store.Store) (*latch.Guard, error) {
	p, err := Policy()
	if err != nil {
		return nil, err
	}
	return latch.Open(ctx, &latch.Config{Policy: p, Store: st})
}

// principal is the agent every campaign call runs as.
var principal = latch.Principal{Agent: "campaign-worker"}

// args is the argument object of a campaign call.
func args(key string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"key": key}) // a string map always encodes
	return b
}

// now is the wall clock in unix nanoseconds, for ledger entries.
func now() int64 { return time.Now().UnixNano() }

//go:build campaign && unix

package campaign

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	soakDuration = flag.Duration("soak.duration", 2*time.Minute, "how long the soak's drivers make calls, per backend")
	soakProcs    = flag.Int("soak.procs", 4, "soak driver processes per backend")
	soakWorkers  = flag.Int("soak.workers", 8, "goroutines per soak driver process")
	soakBackend  = flag.String("soak.backend", "", "run the soak on this backend only (sqlite or postgres)")
	soakCut      = flag.Duration("soak.cut", time.Second, "mean interval between connection cuts on PostgreSQL")
	soakReport   = flag.String("soak.report", "", "append each backend's figures as one JSON line to this file")
)

// SoakFigures is the soak's account of one backend, as recorded in docs/reliability.md.
type SoakFigures struct {
	Backend      string         `json:"backend"`
	Duration     string         `json:"duration"`
	Processes    int            `json:"processes"`
	Workers      int            `json:"workers_per_process"`
	Calls        int            `json:"calls"`
	Actions      int            `json:"actions"` // calls that ended in a receipt
	Outcomes     map[string]int `json:"outcomes"`
	Injected     map[string]int `json:"injected"`
	Executions   int            `json:"executions"`
	States       map[string]int `json:"states"`
	Double       int            `json:"double_executions"`
	Blocked      int            `json:"blocked"`
	Attributed   map[string]int `json:"attributed"`
	Unattributed int            `json:"unattributed"`
	ChainOK      bool           `json:"chain_ok"`
	Receipts     int64          `json:"receipts_verified"`
	Unexpected   []string       `json:"unexpected,omitempty"`
}

// TestSoak runs mixed load from several driver processes with injected faults — executor
// errors, NotExecuted, panics, timeouts, lapsed leases and, on PostgreSQL, a proxy that cuts
// connections — and then checks that no effect ran twice, that every blocked effect is explained
// by a fault in the injection ledger, and that the receipt chain verifies.
func TestSoak(t *testing.T) {
	for _, b := range backends {
		if *soakBackend != "" && *soakBackend != b.name {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			direct := b.url(t, dir)
			drivers := direct
			var proxy *cutProxy
			if b.name == "postgres" {
				proxy = startCutProxy(t, direct, filepath.Join(dir, injectionsFile))
				drivers = proxy.url
			}
			f := soak(t, b.name, direct, drivers, dir, proxy)
			line, _ := json.Marshal(f)
			t.Logf("soak figures: %s", line)
			if *soakReport != "" {
				rf, err := os.OpenFile(*soakReport, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				defer rf.Close()
				if _, err := rf.Write(append(line, '\n')); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func soak(t *testing.T, name, direct, drivers, dir string, proxy *cutProxy) SoakFigures {
	ctx := t.Context()
	until := time.Now().Add(*soakDuration)
	type proc struct {
		out, errOut bytes.Buffer
		done        chan error
	}
	procs := make([]*proc, *soakProcs)
	for i := range procs {
		spec := &childSpec{Role: roleSoak, URL: drivers, Dir: dir, Soak: &soakRun{
			Name: fmt.Sprintf("p%d", i), Until: until.UnixNano(), Workers: *soakWorkers, Seed: rand.Uint64(),
			StoreFault: proxy != nil,
		}}
		cmd, err := spec.command(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p := &proc{done: make(chan error, 1)}
		cmd.Stdout, cmd.Stderr = &p.out, &p.errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.done <- cmd.Wait() }()
		procs[i] = p
	}
	stats := newStats()
	for i, p := range procs {
		if err := <-p.done; err != nil {
			t.Errorf("soak driver %d: %v: %s", i, err, p.errOut.String())
			continue
		}
		var s SoakStats
		if err := json.Unmarshal(p.out.Bytes(), &s); err != nil {
			t.Errorf("soak driver %d: stdout %q: %v", i, p.out.String(), err)
			continue
		}
		stats.add(s)
	}
	if proxy != nil {
		proxy.stop()
		stats.Injected[FaultConnCut] = int(proxy.cuts)
	}

	injections, err := ReadInjections(filepath.Join(dir, injectionsFile))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Check(ctx, direct, filepath.Join(dir, executionsFile), Attribute(injections))
	if err != nil {
		t.Fatal(err)
	}
	f := SoakFigures{
		Backend: name, Duration: soakDuration.String(), Processes: *soakProcs, Workers: *soakWorkers,
		Calls: stats.Calls, Outcomes: stats.Outcomes, Injected: stats.Injected,
		Executions: rep.Executions, States: rep.States, Double: len(rep.Double), Blocked: len(rep.Blocked),
		Attributed: rep.Attributed, Unattributed: len(rep.Unattributed), ChainOK: rep.Chain.OK,
		Receipts: rep.Chain.Verified, Unexpected: stats.Unexpected,
	}
	for o, n := range stats.Outcomes {
		if o != "store_error" && o != "approval_required" && o != "unexpected" && o != "unexpected_panic" {
			f.Actions += n
		}
	}
	t.Logf("%s: %d calls, %d actions, %s", name, f.Calls, f.Actions, rep.Summary())
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	if len(stats.Unexpected) > 0 {
		t.Errorf("%d calls ended otherwise than their fault allows:\n  %s", stats.Outcomes["unexpected"], strings.Join(stats.Unexpected, "\n  "))
	}
	// A soak that injected nothing proves nothing: every kind must have happened.
	kinds := []string{FaultExecutorError, FaultNotExecuted, FaultPanic, FaultTimeout, FaultLeaseLapse}
	if proxy != nil {
		kinds = append(kinds, FaultConnCut)
	}
	for _, k := range kinds {
		if stats.Injected[k] == 0 {
			t.Errorf("no %s was injected in %v (injected: %v)", k, *soakDuration, stats.Injected)
		}
	}
	// Every decided call leaves exactly one receipt; a call the store failed may have left one.
	if storeErrs := stats.Outcomes["store_error"]; rep.CallReceipts < int64(f.Actions) || rep.CallReceipts > int64(f.Actions+storeErrs) {
		t.Errorf("%d call receipts for %d decided calls (and %d store errors)", rep.CallReceipts, f.Actions, storeErrs)
	}
	if stats.Outcomes["committed"] == 0 || rep.States["committed"] == 0 {
		t.Errorf("nothing committed: outcomes %v, states %v", stats.Outcomes, rep.States)
	}
	return f
}

// cutProxy is a TCP proxy in front of PostgreSQL that drops connections at random instants —
// mid-statement, mid-COMMIT, idle — as a network or a server restart would. Each cut is written
// to the injection ledger.
type cutProxy struct {
	ln     net.Listener
	target string
	url    string
	ledger *Ledger
	mu     sync.Mutex
	conns  map[net.Conn]net.Conn // client side → server side
	cuts   int64
	quit   chan struct{}
	wg     sync.WaitGroup
}

func startCutProxy(t *testing.T, direct, ledgerPath string) *cutProxy {
	t.Helper()
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := OpenLedger(ledgerPath, false)
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: u.Host, ledger: ledger, conns: map[net.Conn]net.Conn{}, quit: make(chan struct{})}
	u.Host = ln.Addr().String()
	p.url = u.String()
	p.wg.Go(p.accept)
	p.wg.Go(p.cutter)
	t.Cleanup(p.stop)
	return p
}

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c] = s
		p.mu.Unlock()
		p.wg.Go(func() { io.Copy(s, c); p.drop(c) })
		p.wg.Go(func() { io.Copy(c, s); p.drop(c) })
	}
}

// cutter drops one random connection at random intervals (-soak.cut on average), and every
// connection one time in ten.
func (p *cutProxy) cutter() {
	for {
		select {
		case <-p.quit:
			return
		case <-time.After(rand.N(2 * *soakCut)):
		}
		p.mu.Lock()
		clients := slices.Collect(maps.Keys(p.conns))
		p.mu.Unlock()
		if len(clients) == 0 {
			continue
		}
		victims := clients[rand.IntN(len(clients)):][:1]
		if rand.IntN(10) == 0 {
			victims = clients
		}
		_ = p.ledger.Append(Injection{Kind: FaultConnCut, PID: os.Getpid(), Time: now(), Detail: fmt.Sprintf("%d of %d connections", len(victims), len(clients))})
		for _, c := range victims {
			p.drop(c)
		}
		p.mu.Lock()
		p.cuts++
		p.mu.Unlock()
	}
}

func (p *cutProxy) drop(c net.Conn) {
	p.mu.Lock()
	s, ok := p.conns[c]
	delete(p.conns, c)
	p.mu.Unlock()
	if ok {
		c.Close()
		s.Close()
	}
}

func (p *cutProxy) stop() {
	select {
	case <-p.quit:
		return
	default:
	}
	close(p.quit)
	p.ln.Close()
	p.mu.Lock()
	clients := slices.Collect(maps.Keys(p.conns))
	p.mu.Unlock()
	for _, c := range clients {
		p.drop(c)
	}
	p.wg.Wait()
	p.ledger.Close()
}

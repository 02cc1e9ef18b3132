package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/metrics"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

// ServeConfig configures Serve.
type ServeConfig struct {
	// Store, Workers and Duration are as in CallsConfig; Workers is both the in-process
	// goroutines and the HTTP clients.
	Store    string
	Workers  int
	Duration time.Duration
	// TokenCache is the server's server.Config.TokenCache (0: read the token on every request,
	// the default of latch serve).
	TokenCache time.Duration
	// Pin gives the server its own CPU budget (Linux, at least 2 CPUs): the in-process phase
	// and the server process run on the last CPU alone, the HTTP clients on the others, so
	// that the ratio compares the server with the pipeline on the same single CPU and the
	// clients' CPU is not taken from the server.
	Pin bool
	// CPUProfile, when set, is a file the server process writes a CPU profile of its whole
	// run to (runtime/pprof): what a server spends its CPU on under this load.
	CPUProfile string
	// Command returns the command that runs the server: a process that calls RunServer with
	// spec (the latch binary runs `latch bench --serve-child <spec>`).
	Command func(ctx context.Context, spec string) *exec.Cmd
}

// ServeReport is the result of Serve.
type ServeReport struct {
	Store     string `json:"store"`
	Workers   int    `json:"workers"`
	Duration  string `json:"duration"`
	InProcess Phase  `json:"in_process"`
	// HTTP is one call as a remote worker makes it: POST /v1/actions, then POST
	// /v1/actions/{id}/outcome, over loopback; latency is the two requests together.
	HTTP  Phase   `json:"http"`
	Ratio float64 `json:"ratio"` // HTTP calls/s ÷ in-process calls/s
	// OneRequest is the same call on one request, POST /v1/calls: the action line, the
	// begun action's line, the outcome line and the recorded outcome's line on one exchange.
	// Its ratio, server CPU a call and CPU ratio are those of HTTP, for this phase.
	OneRequest                Phase   `json:"http_one_request"`
	OneRequestRatio           float64 `json:"ratio_one_request"`
	OneRequestServeCPUPerCall float64 `json:"serve_cpu_us_per_call_one_request"`
	OneRequestCPURatio        float64 `json:"cpu_ratio_one_request,omitempty"`
	// ServeRSS and ServePeakRSS are the server process's resident set after the run and at its
	// peak, in bytes (Linux; 0 elsewhere).
	ServeRSS     int64 `json:"serve_rss_bytes"`
	ServePeakRSS int64 `json:"serve_peak_rss_bytes"`
	// ServeCPUPerCall is the server process's CPU time per HTTP call, in microseconds (Linux).
	// HTTP.CPUMicrosPerCall is the clients' (this process's) and InProcess.CPUMicrosPerCall
	// a call's in process.
	ServeCPUPerCall float64 `json:"serve_cpu_us_per_call"`
	// CPURatio is InProcess.CPUMicrosPerCall ÷ ServeCPUPerCall: the ratio the server reaches
	// when the CPU bounds both sides and its clients run on CPUs of their own (Linux).
	CPURatio float64 `json:"cpu_ratio,omitempty"`
	// Pinned is set when the phases ran pinned as ServeConfig.Pin asks.
	Pinned    bool  `json:"pinned,omitempty"`
	Committed int64 `json:"committed"` // committed effects of the HTTP phase, checked against its calls
	// CommittedOneRequest is the committed effects of the OneRequest phase, checked likewise.
	CommittedOneRequest int64 `json:"committed_one_request"`
}

// serveSpec is what the server process is told.
type serveSpec struct {
	Store      string        `json:"store"`
	TokenCache time.Duration `json:"token_cache,omitempty"`
	CPU        int           `json:"cpu,omitempty"` // pin the server to this CPU, when positive
	CPUProfile string        `json:"cpu_profile,omitempty"`
}

// Serve measures the HTTP API against the pipeline in process on the same store: first
// Workers goroutines calling Guard.Execute (as Calls does), then Workers HTTP clients each
// beginning an action and posting its outcome to a `latch serve` process on loopback (two
// requests a call), then Workers HTTP clients making each call on one request (POST
// /v1/calls), with a distinct effect key per call. Every HTTP call must commit.
func Serve(ctx context.Context, cfg *ServeConfig) (*ServeReport, error) {
	var c ServeConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Second
	}
	switch {
	case c.Workers < 0 || c.Duration < 0:
		return nil, fmt.Errorf("bench serve: negative Workers %d or Duration %v", c.Workers, c.Duration)
	case c.Command == nil:
		return nil, errors.New("bench serve: no Command to start the server with")
	}
	storeURL, cleanup, err := ScratchStore(ctx, c.Store)
	if err != nil {
		return nil, fmt.Errorf("bench serve: %w", err)
	}
	defer cleanup()
	rep := &ServeReport{Store: storeURL, Workers: c.Workers, Duration: c.Duration.String()}

	var serverCPU int
	cpus := allCPUs()
	if c.Pin {
		if serverCPU, err = pinPhases(); err != nil {
			return nil, fmt.Errorf("bench serve: %w", err)
		}
		rep.Pinned = true
		defer func() { _ = pinSelf(cpus) }()
	}
	g, err := openGuard(ctx, storeURL)
	if err != nil {
		return nil, fmt.Errorf("bench serve: %w", err)
	}
	rep.InProcess, err = benchLatch(ctx, g, CallsConfig{Workers: c.Workers, Duration: c.Duration})
	var token string
	if err == nil {
		token, err = agentToken(ctx, g.Store())
	}
	if cerr := g.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("bench serve: in process: %w", err)
	}

	if c.Pin {
		// The in-process phase is over: the clients take the other CPUs.
		if err := pinSelf(cpus[:len(cpus)-1]); err != nil {
			return nil, fmt.Errorf("bench serve: %w", err)
		}
	}
	spec, err := json.Marshal(serveSpec{Store: storeURL, TokenCache: c.TokenCache, CPU: serverCPU, CPUProfile: c.CPUProfile})
	if err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := c.Command(sctx, string(spec))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench serve: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench serve: start the server: %w", err)
	}
	waited := false
	defer func() {
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("bench serve: the server did not start: %v\n%s", err, &stderr)
	}
	base := "http://" + strings.TrimSpace(strings.TrimPrefix(addr, "listening "))

	client := &http.Client{Transport: &http.Transport{MaxIdleConns: c.Workers, MaxIdleConnsPerHost: c.Workers}}
	defer client.CloseIdleConnections()
	bufs := make([][]byte, c.Workers)
	// action is worker w's n-th action under run, as a body (a line with a newline at its end).
	action := func(run string, w, n int, line bool) []byte {
		bufs[w] = append(bufs[w][:0], `{"action":"bench.charge","arguments":`...)
		bufs[w] = Args(bufs[w], run, n*c.Workers+w)
		bufs[w] = append(bufs[w], '}')
		if line {
			bufs[w] = append(bufs[w], '\n')
		}
		return bufs[w]
	}
	twoRun, oneRun := runID(), runID()+"o"
	two := func(w, n int) error {
		var begun struct {
			Status   string `json:"status"`
			ActionID string `json:"action_id"`
		}
		if err := post(ctx, client, base+"/v1/actions", token, action(twoRun, w, n, false), &begun); err != nil {
			return err
		}
		if begun.Status != "reserved" {
			return fmt.Errorf("POST /v1/actions: status %q, want reserved", begun.Status)
		}
		var rec struct{ Result string }
		if err := post(ctx, client, base+"/v1/actions/"+begun.ActionID+"/outcome", token, []byte(`{"outcome":"committed"}`), &rec); err != nil {
			return err
		}
		if rec.Result != "committed" {
			return fmt.Errorf("outcome recorded %q, want committed", rec.Result)
		}
		return nil
	}
	one := func(w, n int) error {
		return callOnce(ctx, client, base, token, action(oneRun, w, n, true), committedLine)
	}
	phase := func(call func(w, n int) error) (Phase, float64, error) {
		for n := range warmup {
			if err := call(0, -1-n); err != nil {
				return Phase{}, 0, fmt.Errorf("warm-up: %w", err)
			}
		}
		cpu0 := processCPU(cmd.Process.Pid)
		p, err := measure(ctx, c.Workers, c.Duration, call)
		if err != nil || p.Calls == 0 {
			return p, 0, err
		}
		var perCall float64
		if cpu := processCPU(cmd.Process.Pid); cpu > 0 {
			perCall = micros(cpu-cpu0) / float64(p.Calls)
		}
		return p, perCall, nil
	}
	if rep.HTTP, rep.ServeCPUPerCall, err = phase(two); err != nil {
		return nil, fmt.Errorf("bench serve: http: %w\n%s", err, &stderr)
	}
	if rep.OneRequest, rep.OneRequestServeCPUPerCall, err = phase(one); err != nil {
		return nil, fmt.Errorf("bench serve: http, one request a call: %w\n%s", err, &stderr)
	}
	rep.ServeRSS, rep.ServePeakRSS = processRSS(cmd.Process.Pid)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if c.CPUProfile != "" {
		// The profile is written as the server stops: wait for it (a while, at most).
		t := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
		_ = cmd.Wait()
		t.Stop()
		waited = true
	}

	st, err := latch.OpenStore(ctx, storeURL, &latch.StoreOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("bench serve: %w", err)
	}
	defer st.Close()
	effects, err := st.Effects(ctx, store.EffectFilter{State: store.Committed})
	if err != nil {
		return nil, fmt.Errorf("bench serve: %w", err)
	}
	for _, e := range effects {
		switch {
		case strings.HasPrefix(e.Key, "charge:"+twoRun+"_") && !strings.HasPrefix(e.Key, "charge:"+twoRun+"_-"):
			rep.Committed++
		case strings.HasPrefix(e.Key, "charge:"+oneRun+"_") && !strings.HasPrefix(e.Key, "charge:"+oneRun+"_-"):
			rep.CommittedOneRequest++
		}
	}
	if rep.Committed != rep.HTTP.Calls || rep.CommittedOneRequest != rep.OneRequest.Calls {
		return rep, fmt.Errorf("bench serve: %d committed effects for %d HTTP calls, %d for %d calls on one request",
			rep.Committed, rep.HTTP.Calls, rep.CommittedOneRequest, rep.OneRequest.Calls)
	}
	rep.Ratio = rep.HTTP.CallsPerSec / rep.InProcess.CallsPerSec
	rep.OneRequestRatio = rep.OneRequest.CallsPerSec / rep.InProcess.CallsPerSec
	if rep.ServeCPUPerCall > 0 {
		rep.CPURatio = rep.InProcess.CPUMicrosPerCall / rep.ServeCPUPerCall
	}
	if rep.OneRequestServeCPUPerCall > 0 {
		rep.OneRequestCPURatio = rep.InProcess.CPUMicrosPerCall / rep.OneRequestServeCPUPerCall
	}
	return rep, nil
}

// committedLine is the outcome line of a bench call.
var committedLine = []byte(`{"outcome":"committed"}` + "\n")

// callBody is the request body of a call on one request: the action line, then the outcome
// line once the caller has it (sent on next), then the body's end (next closed). The server
// answers the action before the body ends.
type callBody struct {
	cur  []byte
	next chan []byte
	once sync.Once
}

func (b *callBody) Read(p []byte) (int, error) {
	for len(b.cur) == 0 {
		line, ok := <-b.next
		if !ok {
			return 0, io.EOF
		}
		b.cur = line
	}
	n := copy(p, b.cur)
	b.cur = b.cur[n:]
	return n, nil
}

// end ends the body: once, after the outcome line or instead of it.
func (b *callBody) end() { b.once.Do(func() { close(b.next) }) }

// callOnce makes one call on one request (POST /v1/calls): it sends the action line, reads
// the begun action (it must be reserved), sends outcome, and reads the recorded outcome (it
// must be committed). The answer is read to its end, so the connection is reused.
func callOnce(ctx context.Context, c *http.Client, base, token string, action, outcome []byte) error {
	body := &callBody{cur: action, next: make(chan []byte, 1)}
	defer body.end() // whatever happens, the transport's read of the body ends
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/calls", body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", server.CallContentType)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body.end()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST /v1/calls: %s %s", resp.Status, b)
	}
	lines := bufio.NewReader(resp.Body)
	line, err := lines.ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("POST /v1/calls: the begun action: %w", err)
	}
	var begun struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(line, &begun); err != nil || begun.Status != "reserved" {
		return fmt.Errorf("POST /v1/calls: first line %s (%v), want the reservation", line, err)
	}
	body.next <- outcome
	body.end()
	if line, err = lines.ReadSlice('\n'); err != nil {
		return fmt.Errorf("POST /v1/calls: the recorded outcome: %w", err)
	}
	var rec struct {
		Result string `json:"result"`
	}
	if err := json.Unmarshal(line, &rec); err != nil || rec.Result != "committed" {
		return fmt.Errorf("POST /v1/calls: second line %s (%v), want committed", line, err)
	}
	_, err = io.Copy(io.Discard, lines)
	return err
}

// agentToken creates an agent token for the bench principal.
func agentToken(ctx context.Context, st store.Store) (string, error) {
	ts, ok := st.(store.TokenStore)
	if !ok {
		return "", fmt.Errorf("store %T keeps no tokens", st)
	}
	tok, _, err := auth.CreateToken(ctx, ts, &auth.NewToken{Kind: store.TokenAgent, Agent: Principal.Agent}, time.Now())
	return tok, err
}

func post(ctx context.Context, c *http.Client, url, token string, body []byte, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s %s", url, resp.Status, b)
	}
	return json.Unmarshal(b, into)
}

// RunServer is the server process of Serve: it serves the bench policy on the spec's store on
// a loopback port, as `latch serve` does (metrics sink registered, no sweeper), prints
// "listening ADDR" on stdout, and serves until SIGTERM, SIGINT or ctx ends.
func RunServer(ctx context.Context, spec string) error {
	var s serveSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return fmt.Errorf("bench server: spec: %w", err)
	}
	if s.CPU > 0 {
		if err := pinSelf([]int{s.CPU}); err != nil {
			return fmt.Errorf("bench server: %w", err)
		}
	}
	if s.CPUProfile != "" {
		f, err := os.Create(s.CPUProfile)
		if err != nil {
			return fmt.Errorf("bench server: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("bench server: %w", err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	p, err := policy.Parse("bench.yaml", []byte(Policy))
	if err != nil {
		return err
	}
	m, err := metrics.New(nil)
	if err != nil {
		return err
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: p, StoreURL: s.Store, Sinks: []latch.Sink{m}})
	if err != nil {
		return err
	}
	defer g.Close()
	srv, err := server.New(g, &server.Config{Metrics: m, TokenCache: s.TokenCache})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "listening %s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	return srv.Serve(ctx, ln)
}

// processRSS reads a process's resident set and its peak from /proc (Linux), in bytes.
func processRSS(pid int) (rss, peak int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}

// processCPU reads a process's user and system time from /proc (Linux); 0 elsewhere.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // utime, clock ticks
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks
}

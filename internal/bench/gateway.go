package bench

import (
	"context"
	"errors"
	"fmt"
	"github.com/latchkit/latch/auth"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// GatewayConfig configures Gateway.
type GatewayConfig struct {
	// Store is the gateway's store, as CallsConfig.Store: "" is a scratch SQLite file.
	Store string
	// Workers is how many agent sessions call at once, each its own MCP session; 0 means 1.
	Workers int
	// Duration is how long each phase runs; 0 means 5 s.
	Duration time.Duration
}

// CPUPerCall is processor time per call of each phase, in microseconds.
type CPUPerCall struct {
	Direct  float64 `json:"direct"`
	Keyed   float64 `json:"gateway_keyed"`
	Unkeyed float64 `json:"gateway_unkeyed"`
}

// GatewayReport is the result of Gateway.
type GatewayReport struct {
	Store    string `json:"store"`
	Workers  int    `json:"workers"`
	Duration string `json:"duration"`
	// Direct is agents calling the upstream's refund tool with no gateway.
	Direct Phase `json:"direct"`
	// Keyed is the same calls through the gateway, each with its own effect key: decided,
	// reserved, forwarded, recorded with its receipt.
	Keyed Phase `json:"gateway_keyed"`
	// Unkeyed is a read-only tool through the gateway: decided, forwarded, recorded; no
	// reservation.
	Unkeyed Phase `json:"gateway_unkeyed"`
	// Ratio is Keyed calls/s ÷ Direct calls/s.
	Ratio float64 `json:"ratio"`
	// CPU is the processor time (user + system) of this whole process per call in each phase,
	// in microseconds: agents, gateway and upstream all run in it, so Keyed − Direct is what
	// the gateway costs in CPU. Unlike latency it hardly moves with other processes' load.
	CPU CPUPerCall `json:"cpu_us_per_call"`
	// Committed is the committed effect records the keyed phase left (with its warm-up): one
	// per call, or the run is an error.
	Committed int64 `json:"committed"`
}

// gatewayPolicy is the bench gateway's policy; %s is the upstream's URL.
const gatewayPolicy = `schema: latch.policy/v1
gateway:
  upstreams:
    up:
      url: %s
actions:
  mcp.up.refund:
    effect: "refund:{order_id}"
    decision: allow
  mcp.up.balance:
    decision: allow
`

type refundArgs struct {
	OrderID string `json:"order_id"`
	Amount  int    `json:"amount"`
}

type refundResult struct {
	RefundID string `json:"refund_id"`
}

type balanceArgs struct {
	Account string `json:"account"`
}

type balanceResult struct {
	Cents int `json:"cents"`
}

// upstreamServer is a payments-like MCP server whose tools do no work of their own, so that
// what is measured is the transport and, through the gateway, latch.
func upstreamServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench-upstream", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "refund"}, func(_ context.Context, _ *mcp.CallToolRequest, a refundArgs) (*mcp.CallToolResult, refundResult, error) {
		return nil, refundResult{RefundID: "re_" + a.OrderID}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "balance", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, a balanceArgs) (*mcp.CallToolResult, balanceResult, error) {
			return nil, balanceResult{Cents: 12345}, nil
		})
	return s
}

// serveLoopback serves h on a fresh 127.0.0.1 port and returns its URL and a stop function.
func serveLoopback(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = hs.Close() }, nil
}

type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// sessions connects n go-sdk clients to the streamable-HTTP endpoint url, with token when set.
func sessions(ctx context.Context, n int, url, token string) ([]*mcp.ClientSession, error) {
	var out []*mcp.ClientSession
	// Direct and through the gateway alike, each session keeps its connections alive.
	base := &http.Transport{MaxIdleConnsPerHost: 2 * n}
	client := &http.Client{Transport: base}
	if token != "" {
		client.Transport = bearerTransport{token: token, base: base}
	}
	for range n {
		tr := &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, HTTPClient: client}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench-agent", Version: "1"}, nil).Connect(ctx, tr, nil)
		if err != nil {
			closeAll(out)
			return nil, err
		}
		out = append(out, cs)
	}
	return out, nil
}

func closeAll(ss []*mcp.ClientSession) {
	for _, s := range ss {
		_ = s.Close()
	}
}

// Gateway measures what the gateway adds to a tool call: agents (go-sdk clients, one MCP
// session per worker) call an upstream MCP server over streamable HTTP on loopback, first
// directly, then through a gateway — itself serving streamable HTTP on loopback, authenticating
// every request by an agent token — with a distinct effect key per call, then a read-only
// tool with no key through the gateway. Every call is a real round trip over real sockets;
// the upstream's tools do no work, so the difference is the gateway's. cfg may be nil.
func Gateway(ctx context.Context, cfg *GatewayConfig) (*GatewayReport, error) {
	var c GatewayConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Second
	}
	if c.Workers < 0 || c.Duration < 0 {
		return nil, fmt.Errorf("bench gateway: negative Workers %d or Duration %v", c.Workers, c.Duration)
	}
	storeURL, cleanup, err := ScratchStore(ctx, c.Store)
	if err != nil {
		return nil, fmt.Errorf("bench gateway: %w", err)
	}
	defer cleanup()
	rep := &GatewayReport{Store: storeURL, Workers: c.Workers, Duration: c.Duration.String()}

	upSrv := upstreamServer()
	upURL, stopUp, err := serveLoopback(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upSrv }, nil))
	if err != nil {
		return nil, fmt.Errorf("bench gateway: upstream: %w", err)
	}
	defer stopUp()

	run := runID()
	if rep.Direct, rep.CPU.Direct, err = measureTool(ctx, c, upURL, "", "refund", run+"d"); err != nil {
		return nil, fmt.Errorf("bench gateway: direct: %w", err)
	}

	pol, err := policy.Parse("bench-gateway.yaml", fmt.Appendf(nil, gatewayPolicy, upURL))
	if err != nil {
		return nil, fmt.Errorf("bench gateway: %w", err)
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: storeURL})
	if err != nil {
		return nil, fmt.Errorf("bench gateway: %w", err)
	}
	defer g.Close()
	gw, err := gateway.New(ctx, &gateway.Config{Guard: g})
	if err != nil {
		return nil, fmt.Errorf("bench gateway: %w", err)
	}
	defer gw.Close()
	ts, ok := g.Store().(store.TokenStore)
	if !ok {
		return nil, fmt.Errorf("bench gateway: store %T keeps no tokens", g.Store())
	}
	token, _, err := auth.CreateToken(ctx, ts, &auth.NewToken{Kind: store.TokenAgent, Agent: Principal.Agent}, time.Now())
	if err != nil {
		return nil, fmt.Errorf("bench gateway: %w", err)
	}
	gwURL, stopGw, err := serveLoopback(gw.Handler(&auth.Authenticator{Tokens: ts}))
	if err != nil {
		return nil, fmt.Errorf("bench gateway: %w", err)
	}
	defer stopGw()

	if rep.Keyed, rep.CPU.Keyed, err = measureTool(ctx, c, gwURL, token, "up.refund", run+"k"); err != nil {
		return nil, fmt.Errorf("bench gateway: keyed: %w", err)
	}
	if rep.Unkeyed, rep.CPU.Unkeyed, err = measureTool(ctx, c, gwURL, token, "up.balance", run+"u"); err != nil {
		return nil, fmt.Errorf("bench gateway: unkeyed: %w", err)
	}
	effects, err := g.Store().Effects(ctx, store.EffectFilter{State: store.Committed})
	if err != nil {
		return nil, fmt.Errorf("bench gateway: %w", err)
	}
	rep.Committed = int64(len(effects))
	if want := rep.Keyed.Calls + warmup; rep.Committed != want {
		return rep, fmt.Errorf("bench gateway: %d committed effects for %d keyed calls", rep.Committed, want)
	}
	rep.Ratio = rep.Keyed.CallsPerSec / rep.Direct.CallsPerSec
	return rep, nil
}

// warmup is how many calls each phase makes before the clock runs.
const warmup = 20

// measureTool connects c.Workers sessions to url and calls tool from each for c.Duration,
// each call with its own order id. It returns the phase and the process's CPU time per call
// in microseconds.
func measureTool(ctx context.Context, c GatewayConfig, url, token, tool, run string) (Phase, float64, error) {
	ss, err := sessions(ctx, c.Workers, url, token)
	if err != nil {
		return Phase{}, 0, err
	}
	defer closeAll(ss)
	args := func(w, n int) map[string]any {
		if tool == "up.balance" {
			return map[string]any{"account": "acct_" + strconv.Itoa(w)}
		}
		return map[string]any{"order_id": run + "_" + strconv.Itoa(w) + "_" + strconv.Itoa(n), "amount": 24900}
	}
	call := func(w, n int) error {
		res, err := ss[w].CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args(w, n)})
		if err != nil {
			return err
		}
		if res.IsError {
			return errors.New("tool error")
		}
		return nil
	}
	for n := range warmup {
		if err := call(0, -1-n); err != nil {
			return Phase{}, 0, err
		}
	}
	before := cpuTime()
	p, err := measure(ctx, c.Workers, c.Duration, call)
	if err != nil || p.Calls == 0 {
		return p, 0, err
	}
	return p, micros(cpuTime()-before) / float64(p.Calls), nil
}

// cpuTime is the user and system time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

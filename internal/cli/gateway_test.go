package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/store"
)

// These tests run `latch gateway` and `latch mcp-operator` as real processes (this test binary
// under the name latch), with the example payments server as a real upstream process, and
// drive them with go-sdk clients: nothing in between is simulated.

var (
	paymentsOnce sync.Once
	paymentsBin  string
	paymentsErr  error
)

// payments builds the example upstream once for the package's tests.
func payments(t *testing.T) string {
	t.Helper()
	paymentsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "latch-payments")
		if err != nil {
			paymentsErr = err
			return
		}
		paymentsBin = filepath.Join(dir, "payments")
		// go test puts its own GOROOT/bin first in $PATH: "go" is the toolchain running the test.
		out, err := exec.Command("go", "build", "-o", paymentsBin, "../../examples/gateway/payments").CombinedOutput()
		if err != nil {
			paymentsErr = fmt.Errorf("go build payments: %v\n%s", err, out)
		}
	})
	if paymentsErr != nil {
		t.Fatal(paymentsErr)
	}
	return paymentsBin
}

// mcpEnv is a directory with a policy, its store, the latch binary and a ledger.
type mcpEnv struct {
	dir, policy, latch, ledger string
}

func newMCPEnv(t *testing.T, policyText string) *mcpEnv {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &mcpEnv{dir: dir, policy: filepath.Join(dir, "latch.yaml"), latch: filepath.Join(dir, "latch"), ledger: filepath.Join(dir, "ledger")}
	if err := os.Symlink(exe, e.latch); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.policy, []byte(policyText), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// command is `latch --policy P ARGS…` with a clean environment.
func (e *mcpEnv) command(args ...string) *exec.Cmd {
	cmd := exec.Command(e.latch, append([]string{"--policy", e.policy}, args...)...)
	cmd.Env = cleanEnv()
	cmd.Dir = e.dir
	return cmd
}

// run runs latch to completion and returns its stdout; a non-zero exit fails the test.
func (e *mcpEnv) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := e.command(args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("latch %v: %v\n%s", args, err, errb.String())
	}
	return string(out)
}

// ledgerLines are the refunds the upstream really performed (complete lines only: the upstream
// creates the file before it writes the line).
func (e *mcpEnv) ledgerLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(e.ledger)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		line, rest, ok := bytes.Cut(b, []byte("\n"))
		if !ok {
			return out
		}
		out = append(out, string(line))
		b = rest
	}
}

// stdioClient starts `latch ARGS…` speaking MCP on stdio and connects a go-sdk client to it.
func (e *mcpEnv) stdioClient(t *testing.T, stderr io.Writer, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := e.command(args...)
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to latch %v: %v", args, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// started is a background process and what it has written to stderr so far.
type started struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *started) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// startAndWait starts cmd and waits until a line of its output (stdout when fromStdout, else
// stderr) matches re; it returns the first submatch. The process is killed at cleanup.
func startAndWait(t *testing.T, cmd *exec.Cmd, fromStdout bool, re *regexp.Regexp) (*started, string) {
	t.Helper()
	s := &started{cmd: cmd}
	var r io.Reader
	var err error
	if fromStdout {
		var rc io.ReadCloser
		rc, err = cmd.StdoutPipe()
		r = rc
		cmd.Stderr = &lockedWriter{s: s}
	} else {
		var rc io.ReadCloser
		rc, err = cmd.StderrPipe()
		r = rc
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if !fromStdout {
				s.mu.Lock()
				s.buf.WriteString(line + "\n")
				s.mu.Unlock()
			}
			if m := re.FindStringSubmatch(line); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case v, ok := <-found:
		if !ok {
			t.Fatalf("%s ended before printing %s:\n%s", cmd.Path, re, s.stderr())
		}
		return s, v
	case <-time.After(60 * time.Second):
		t.Fatalf("%s never printed %s:\n%s", cmd.Path, re, s.stderr())
	}
	return nil, ""
}

type lockedWriter struct{ s *started }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.buf.Write(p)
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// httpClient connects a go-sdk client to the streamable-HTTP endpoint url with token.
func httpClient(t *testing.T, url, token string) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer{token}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(t.Context(), tr, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// refusalOf returns the JSON-RPC code and data of a gateway error.
func refusalOf(t *testing.T, err error) (int64, gateway.Refusal) {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not a JSON-RPC error", err, err)
	}
	var r gateway.Refusal
	if err := json.Unmarshal(we.Data, &r); err != nil {
		t.Fatalf("error data %s: %v", we.Data, err)
	}
	return we.Code, r
}

func callRefund(t *testing.T, cs *mcp.ClientSession, order string, amount int) (*mcp.CallToolResult, error) {
	t.Helper()
	return cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "payments.refund", Arguments: map[string]any{"order_id": order, "amount": amount}})
}

// gatewayPolicy lists refund (keyed; approval above 50000) and nothing else of the payments
// upstream, whose other tool, balance, is therefore denied. upstream is the gateway section's
// upstream body.
func gatewayPolicy(upstream string) string {
	return `schema: latch.policy/v1
gateway:
  upstreams:
    payments:
` + upstream + `
actions:
  mcp.payments.refund:
    effect: "refund:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer }
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: approve
`
}

func commandUpstream(bin, ledger string) string {
	return fmt.Sprintf("      command: [%q, -ledger, %q]", bin, ledger)
}

// TestGatewayStdioProcess: agent (go-sdk client) → `latch gateway --stdio` (a process) → the
// payments upstream (a process it spawns). Only the tools the policy may allow are listed, an
// allowed call passes, an unlisted tool is denied,
// a duplicate is refused with the stored result, and an upstream killed mid-call leaves the
// effect ambiguous and the re-sent call refused with nothing sent.
func TestGatewayStdioProcess(t *testing.T) {
	t.Parallel()
	bin := payments(t)
	e := newMCPEnv(t, "")
	if err := os.WriteFile(e.policy, []byte(gatewayPolicy(commandUpstream(bin, e.ledger))), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cs := e.stdioClient(t, &lockedBuffer{b: &stderr}, "gateway", "--stdio", "--agent", "support-bot")
	ctx := t.Context()

	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	// balance, which the policy does not list, is left out of tools/list by default; its call
	// below is still refused unknown_action.
	if got := strings.Join(names, ","); got != "payments.refund" {
		t.Errorf("tools = %s, want payments.refund", got)
	}

	first, err := callRefund(t, cs, "ord_1", 500)
	if err != nil {
		t.Fatalf("allowed refund: %v", err)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Fatalf("ledger = %q, want one refund", lines)
	}

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "payments.balance", Arguments: map[string]any{"account": "a"}})
	if code, r := refusalOf(t, err); code != gateway.CodeDenied || r.Reason != "unknown_action" {
		t.Errorf("unlisted balance = %d %+v, want %d unknown_action", code, r, gateway.CodeDenied)
	}

	_, err = callRefund(t, cs, "ord_1", 500)
	code, r := refusalOf(t, err)
	if code != gateway.CodeDuplicate || r.EffectState != "committed" {
		t.Fatalf("duplicate refund = %d %+v, want %d committed", code, r, gateway.CodeDuplicate)
	}
	var stored mcp.CallToolResult
	if err := json.Unmarshal(r.Result, &stored); err != nil {
		t.Fatalf("stored result %s: %v", r.Result, err)
	}
	want, _ := json.Marshal(first.StructuredContent)
	got, _ := json.Marshal(stored.StructuredContent)
	if !bytes.Equal(got, want) {
		t.Errorf("duplicate's stored result = %s, want the first call's %s", got, want)
	}

	killMidCall(t, e, cs, "hang-ord_2")
	if lines := e.ledgerLines(t); len(lines) != 2 {
		t.Errorf("ledger = %q, want the two refunds that ran", lines)
	}
}

// killMidCall sends a refund the upstream performs and never answers, kills the upstream, and
// checks the call is ambiguous, the effect is held ambiguous, and a re-send is refused.
func killMidCall(t *testing.T, e *mcpEnv, cs *mcp.ClientSession, order string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := callRefund(t, cs, order, 900)
		done <- err
	}()
	var pid int
	for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
		for _, l := range e.ledgerLines(t) {
			if f := strings.Fields(l); len(f) >= 3 && f[2] == order {
				pid, _ = strconv.Atoi(f[0])
			}
		}
		if pid == 0 && time.Now().After(deadline) {
			t.Fatal("the upstream never started the refund")
		}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill upstream %d: %v", pid, err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not return after the upstream died")
	}
	code, r := refusalOf(t, err)
	if code != gateway.CodeAmbiguous || r.EffectKey != "refund:"+order {
		t.Fatalf("killed refund = %d %+v, want %d ambiguous", code, r, gateway.CodeAmbiguous)
	}
	if out := e.run(t, "effects", "--state", "ambiguous", "--json"); !strings.Contains(out, `"effect_key":"refund:`+order+`"`) {
		t.Errorf("effects --state ambiguous = %s, want refund:%s", out, order)
	}
	_, err = callRefund(t, cs, order, 900)
	if code, r := refusalOf(t, err); code != gateway.CodeEffectAmbiguous || r.EffectState != "ambiguous" {
		t.Errorf("re-sent refund = %d %+v, want %d effect_ambiguous", code, r, gateway.CodeEffectAmbiguous)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestGatewayHTTPProcess: agent → `latch gateway` on loopback HTTP (a process, authenticated by
// a token of `latch token create`) → the payments upstream serving streamable HTTP (a process).
func TestGatewayHTTPProcess(t *testing.T) {
	t.Parallel()
	bin := payments(t)
	e := newMCPEnv(t, "")
	_, upURL := startAndWait(t, exec.Command(bin, "-ledger", e.ledger, "-http", "127.0.0.1:0"), true, regexp.MustCompile(`^(http://\S+)$`))
	if err := os.WriteFile(e.policy, []byte(gatewayPolicy("      url: "+upURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	var tok struct{ Token string }
	if err := json.Unmarshal([]byte(e.run(t, "token", "create", "--agent", "support-bot", "--json")), &tok); err != nil || tok.Token == "" {
		t.Fatalf("token create --json: %v", err)
	}
	gw, url := startAndWait(t, e.command("gateway", "--listen", "127.0.0.1:0"), false, regexp.MustCompile(`url=(http://\S+/mcp)`))

	if cs, err := httpClient(t, url, ""); err == nil {
		_ = cs.Close()
		t.Error("connect without a token succeeded, want refused")
	}
	cs, err := httpClient(t, url, tok.Token)
	if err != nil {
		t.Fatalf("connect with an agent token: %v\n%s", err, gw.stderr())
	}
	if _, err := callRefund(t, cs, "ord_h1", 700); err != nil {
		t.Fatalf("allowed refund over HTTP: %v\n%s", err, gw.stderr())
	}
	_, err = callRefund(t, cs, "ord_h1", 700)
	if code, r := refusalOf(t, err); code != gateway.CodeDuplicate || r.EffectState != "committed" || len(r.Result) == 0 {
		t.Errorf("duplicate refund = %d %+v, want %d committed with the stored result", code, r, gateway.CodeDuplicate)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("ledger = %q, want one refund", lines)
	}
	killMidCall(t, e, cs, "hang-ord_h2")
}

// The startup warning names a tool the policy lets run without an effect key; --strict turns
// it into a refusal to start, exit 1, with the tool named.
func TestGatewayStrict(t *testing.T) {
	t.Parallel()
	bin := payments(t)
	e := newMCPEnv(t, "")
	pol := gatewayPolicy(commandUpstream(bin, e.ledger)) + "  mcp.payments.balance:\n    decision: allow\n"
	if err := os.WriteFile(e.policy, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := e.command("gateway", "--stdio", "--agent", "support-bot", "--strict")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdin = strings.NewReader("")
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("gateway --strict = %v, want exit 1\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "--strict: refusing to start") || !strings.Contains(stderr.String(), "tool payments.balance runs without an effect key") {
		t.Errorf("stderr = %s, want the refusal naming payments.balance", stderr.String())
	}

	// Without --strict the same warning is logged and the gateway serves.
	var warn lockedBuffer
	warn.b = &bytes.Buffer{}
	cs := e.stdioClient(t, &warn, "gateway", "--stdio", "--agent", "support-bot")
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "payments.balance", Arguments: map[string]any{"account": "a"}}); err != nil {
		t.Fatalf("balance: %v", err)
	}
	if !strings.Contains(warn.String(), "level=WARN") || !strings.Contains(warn.String(), "tool payments.balance runs without an effect key") {
		t.Errorf("stderr = %s, want the warning naming payments.balance", warn.String())
	}
}

// Flags that cannot go together are usage errors (exit 2), before anything starts.
func TestGatewayUsage(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, gatewayPolicy(`      command: [nowhere]`))
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"gateway", "--stdio"}, "--stdio needs --agent"},
		{[]string{"gateway", "--agent", "a"}, "--agent and --user go with --stdio"},
		{[]string{"gateway", "--stdio", "--agent", "a", "--listen", "127.0.0.1:1"}, "--listen is for HTTP"},
		{[]string{"gateway", "--listen", "0.0.0.0:7421"}, "is not loopback"},
		{[]string{"gateway", "--jwt-issuer", "https://id.example"}, "--jwt-audience"},
		{[]string{"gateway", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"gateway", "--approval-wait", "-1s"}, "--approval-wait -1s: want a duration"},
		{[]string{"gateway", "--stdio", "--agent", "a", "--notify-format", "slack"}, "go with --notify URL"},
		{[]string{"gateway", "--stdio", "--agent", "a", "--notify", "https://hooks.example/latch"}, "--notify needs a secret to sign alerts"},
	}
	for _, tt := range tests {
		cmd := e.command(tt.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("latch %v = %v, %q; want exit 2 saying %q", tt.args, err, stderr.String(), tt.want)
		}
	}
}

// callTool calls name on cs and decodes its structured result into out; a tool error (isError)
// is returned as an error holding its text.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) error {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		var parts []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				parts = append(parts, tc.Text)
			}
		}
		return errors.New(strings.Join(parts, "; "))
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s result %s: %v", name, b, err)
		}
	}
	return nil
}

type approvalView struct {
	ApprovalID string         `json:"approval_id"`
	Status     string         `json:"status"`
	Action     string         `json:"action"`
	ActionHash string         `json:"action_hash"`
	Arguments  map[string]any `json:"arguments"`
	Approver   string         `json:"approver"`
	Answers    []struct {
		Method   string `json:"method"`
		Verified bool   `json:"verified"`
		Note     string `json:"note"`
	} `json:"answers"`
}

// TestApprovalThroughMCPOperator: an approval-gated call through `latch gateway` (a process) is
// refused with the request's id; `latch mcp-operator --stdio --as alice` (a process, driven by
// a go-sdk client) lists it with the exact arguments, refuses the requester approving itself,
// and approves it as alice, recorded method cli and not verified; the agent re-sends the same call and it runs
// exactly once.
func TestApprovalThroughMCPOperator(t *testing.T) {
	t.Parallel()
	bin := payments(t)
	e := newMCPEnv(t, "")
	if err := os.WriteFile(e.policy, []byte(gatewayPolicy(commandUpstream(bin, e.ledger))), 0o600); err != nil {
		t.Fatal(err)
	}
	var gwErr lockedBuffer
	gwErr.b = &bytes.Buffer{}
	agent := e.stdioClient(t, &gwErr, "gateway", "--stdio", "--agent", "support-bot")
	_, err := callRefund(t, agent, "ord_big", 80000)
	code, r := refusalOf(t, err)
	if code != gateway.CodeApprovalRequired || !strings.HasPrefix(r.ApprovalID, "apr_") {
		t.Fatalf("large refund = %d %+v, want %d approval_required", code, r, gateway.CodeApprovalRequired)
	}
	if lines := e.ledgerLines(t); len(lines) != 0 {
		t.Fatalf("ledger = %q, want nothing sent before approval", lines)
	}

	var opErr lockedBuffer
	opErr.b = &bytes.Buffer{}
	op := e.stdioClient(t, &opErr, "mcp-operator", "--stdio", "--as", "alice")
	var list struct{ Approvals []approvalView }
	if err := callTool(t, op, "list_approvals", nil, &list); err != nil {
		t.Fatalf("list_approvals: %v", err)
	}
	if len(list.Approvals) != 1 || list.Approvals[0].ApprovalID != r.ApprovalID || list.Approvals[0].ActionHash != r.ActionHash ||
		list.Approvals[0].Action != "mcp.payments.refund" || list.Approvals[0].Arguments["amount"] != float64(80000) {
		t.Fatalf("list_approvals = %+v, want %s for refund of 80000 bound to %s", list.Approvals, r.ApprovalID, r.ActionHash)
	}

	// The requesting agent cannot approve its own request through the operator either.
	self := e.stdioClient(t, io.Discard, "mcp-operator", "--stdio", "--as", "support-bot")
	if err := callTool(t, self, "approve", map[string]any{"approval_id": r.ApprovalID}, nil); err == nil || !strings.Contains(err.Error(), "self_approval") {
		t.Fatalf("approve as the requester = %v, want self_approval", err)
	}

	var granted approvalView
	if err := callTool(t, op, "approve", map[string]any{"approval_id": r.ApprovalID, "note": "customer called"}, &granted); err != nil {
		t.Fatalf("approve: %v", err)
	}
	if granted.Status != "granted" || granted.Approver != "alice" || len(granted.Answers) != 1 ||
		granted.Answers[0].Method != "cli" || granted.Answers[0].Verified || granted.Answers[0].Note != "customer called" {
		t.Errorf("approve = %+v, want granted by alice, recorded method cli and not verified, with her note", granted)
	}

	// The agent re-sends the very same call: it runs, once.
	if _, err := callRefund(t, agent, "ord_big", 80000); err != nil {
		t.Fatalf("re-sent refund after approval: %v\n%s", err, gwErr.String())
	}
	_, err = callRefund(t, agent, "ord_big", 80000)
	if code, r := refusalOf(t, err); code != gateway.CodeDuplicate {
		t.Errorf("third send = %d %+v, want %d duplicate_effect", code, r, gateway.CodeDuplicate)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("ledger = %q, want exactly one refund", lines)
	}
	var shown approvalView
	if err := callTool(t, op, "show_approval", map[string]any{"approval_id": r.ApprovalID}, &shown); err != nil || shown.Status != "consumed" {
		t.Errorf("show_approval = %+v, %v; want consumed", shown, err)
	}
}

// TestOperatorHTTPResolvesAmbiguous: an upstream killed mid-call leaves the effect ambiguous and
// the re-send refused; `latch mcp-operator` over HTTP (a process) refuses an agent token, lists
// the effect as needing attention to an approver token, and resolves it committed with a
// result as that approver; the re-send is then refused duplicate_effect with that result.
func TestOperatorHTTPResolvesAmbiguous(t *testing.T) {
	t.Parallel()
	bin := payments(t)
	e := newMCPEnv(t, "")
	if err := os.WriteFile(e.policy, []byte(gatewayPolicy(commandUpstream(bin, e.ledger))), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := e.stdioClient(t, io.Discard, "gateway", "--stdio", "--agent", "support-bot")
	killMidCall(t, e, agent, "hang-ord_9")

	var approverTok, agentTok struct{ Token string }
	if err := json.Unmarshal([]byte(e.run(t, "token", "create", "--approver", "bob", "--json")), &approverTok); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(e.run(t, "token", "create", "--agent", "support-bot", "--json")), &agentTok); err != nil {
		t.Fatal(err)
	}
	opProc, url := startAndWait(t, e.command("mcp-operator", "--listen", "127.0.0.1:0"), false, regexp.MustCompile(`url=(http://\S+/mcp)`))
	if cs, err := httpClient(t, url, agentTok.Token); err == nil {
		_ = cs.Close()
		t.Error("operator session with an agent token succeeded, want refused")
	}
	op, err := httpClient(t, url, approverTok.Token)
	if err != nil {
		t.Fatalf("connect with an approver token: %v\n%s", err, opProc.stderr())
	}
	var effects struct {
		Effects []struct {
			EffectKey string `json:"effect_key"`
			State     string `json:"state"`
		}
	}
	if err := callTool(t, op, "list_effects", nil, &effects); err != nil {
		t.Fatal(err)
	}
	if len(effects.Effects) != 1 || effects.Effects[0].EffectKey != "refund:hang-ord_9" || effects.Effects[0].State != "ambiguous" {
		t.Fatalf("list_effects = %+v, want refund:hang-ord_9 ambiguous", effects.Effects)
	}
	var resolved struct {
		State      string `json:"state"`
		ResolvedBy string `json:"resolved_by"`
	}
	if err := callTool(t, op, "resolve", map[string]any{"effect_key": "refund:hang-ord_9", "to": "committed",
		"result": map[string]any{"refund_id": "re_manual"}, "note": "seen in the bank's dashboard"}, &resolved); err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if resolved.State != "committed" || resolved.ResolvedBy != "mcp:bob" {
		t.Errorf("resolve = %+v, want committed by mcp:bob", resolved)
	}
	_, err = callRefund(t, agent, "hang-ord_9", 900)
	code, r := refusalOf(t, err)
	if code != gateway.CodeDuplicate || !strings.Contains(string(r.Result), "re_manual") {
		t.Errorf("re-send after resolution = %d %+v, want %d with the resolved result", code, r, gateway.CodeDuplicate)
	}
	var rep struct {
		OK       bool  `json:"ok"`
		Verified int64 `json:"verified"`
	}
	if err := callTool(t, op, "verify_receipts", nil, &rep); err != nil || !rep.OK || rep.Verified == 0 {
		t.Errorf("verify_receipts = %+v, %v; want an intact chain", rep, err)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("ledger = %q, want the one refund the killed upstream made", lines)
	}
}

// TestMCPCommandsStopOnSIGTERM: `latch gateway` and `latch mcp-operator` (real processes), each
// with one MCP client connected over streamable HTTP and idle, exit 0 promptly on SIGTERM: the
// idle session's stream does not hold the shutdown, nor does a connection that never sent a
// request (an HTTP client's spare; net/http alone waits five seconds on one).
func TestMCPCommandsStopOnSIGTERM(t *testing.T) {
	t.Parallel()
	bin := payments(t)
	for _, tt := range []struct{ command, kind string }{{"gateway", "--agent"}, {"mcp-operator", "--approver"}} {
		t.Run(tt.command, func(t *testing.T) {
			t.Parallel()
			e := newMCPEnv(t, "")
			if err := os.WriteFile(e.policy, []byte(gatewayPolicy(commandUpstream(bin, e.ledger))), 0o600); err != nil {
				t.Fatal(err)
			}
			var tok struct{ Token string }
			if err := json.Unmarshal([]byte(e.run(t, "token", "create", tt.kind, "someone", "--json")), &tok); err != nil {
				t.Fatal(err)
			}
			proc, url := startAndWait(t, e.command(tt.command, "--listen", "127.0.0.1:0"), false, regexp.MustCompile(`url=(http://\S+/mcp)`))
			cs, err := httpClient(t, url, tok.Token)
			if err != nil {
				t.Fatalf("connect: %v\n%s", err, proc.stderr())
			}
			for _, err := range cs.Tools(t.Context(), nil) {
				if err != nil {
					t.Fatal(err)
				}
			}
			spare, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp"))
			if err != nil {
				t.Fatal(err)
			}
			defer spare.Close()
			time.Sleep(200 * time.Millisecond) // idle, its server stream open
			start := time.Now()
			if err := proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- proc.cmd.Wait() }()
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("latch %s after SIGTERM: %v, want exit 0\n%s", tt.command, err, proc.stderr())
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("latch %s took %v to stop, want under 5s\n%s", tt.command, d, proc.stderr())
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("latch %s still running 20s after SIGTERM\n%s", tt.command, proc.stderr())
			}
		})
	}
}

// TestGatewayProcessSweeps: a lease that lapsed in the store (its holder crashed) is written
// ambiguous by a running `latch gateway` (a process), without any call meeting it.
func TestGatewayProcessSweeps(t *testing.T) {
	t.Parallel()
	bin := payments(t)
	e := newMCPEnv(t, "")
	if err := os.WriteFile(e.policy, []byte(gatewayPolicy(commandUpstream(bin, e.ledger))), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: e.policy})
	if err != nil {
		t.Fatal(err)
	}
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "crashed-worker"})
	if _, err := g.Begin(ctx, &latch.Call{Action: "mcp.payments.refund", Arguments: json.RawMessage(`{"order_id":"lost","amount":5}`),
		Options: &latch.Options{Lease: time.Second}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	cmd := e.command("gateway", "--stdio", "--agent", "support-bot", "--sweep", "100ms")
	if _, err := cmd.StdinPipe(); err != nil { // held open: the gateway serves until it closes
		t.Fatal(err)
	}
	startAndWait(t, cmd, false, regexp.MustCompile(`(serving MCP on stdio)`))
	// The record itself, as the store holds it (listings show a lapsed lease as needing a
	// person before anything writes it).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		eff, err := g.Store().Effect(t.Context(), "refund:lost")
		if err == nil && eff.State == store.Ambiguous {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("refund:lost = %+v, %v; want it swept ambiguous", eff, err)
		}
	}
}

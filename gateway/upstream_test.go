package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests of limits, deadlines and refusals run this test binary as their upstream MCP server
// (a real go-sdk server in its own process): `gateway.test latch-test-upstream stdio LEDGER`
// speaks MCP on stdio; `… http LEDGER json|sse` serves streamable HTTP on 127.0.0.1 and prints
// its URL. Each tool appends what it did to the ledger file, so a test reads what the upstream
// really did, from outside the gateway.

const upstreamArg = "latch-test-upstream"

// runUpstream serves the test upstream when the binary was started as one; it reports whether
// it was.
func runUpstream() bool {
	if len(os.Args) < 4 || os.Args[1] != upstreamArg {
		return false
	}
	mode, ledger := os.Args[2], os.Args[3]
	s := testUpstream(ledger)
	switch mode {
	case "stdio":
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "http":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
			&mcp.StreamableHTTPOptions{JSONResponse: len(os.Args) > 4 && os.Args[4] == "json"})
		fmt.Printf("http://%s/mcp\n", ln.Addr())
		_ = http.Serve(ln, h)
	}
	os.Exit(0)
	return true
}

type actArgs struct {
	ID    string `json:"id"`
	N     int    `json:"n,omitempty"`     // the size of the answer's text, in bytes
	Fail  bool   `json:"fail,omitempty"`  // answer isError
	Extra string `json:"extra,omitempty"` // an argument that changes the action, not the key
}

var ledgerMu sync.Mutex

func appendLedger(path, line string) {
	ledgerMu.Lock()
	defer ledgerMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		panic(err)
	}
}

func testUpstream(ledger string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-upstream"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "act", Description: "Act once; answer n bytes."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a actArgs) (*mcp.CallToolResult, any, error) {
			appendLedger(ledger, "act "+a.ID)
			text := a.ID
			if a.N > 0 {
				text = strings.Repeat("x", a.N)
			}
			return &mcp.CallToolResult{IsError: a.Fail, Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Act, then never answer."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a actArgs) (*mcp.CallToolResult, any, error) {
			appendLedger(ledger, "hang "+a.ID)
			<-ctx.Done()
			appendLedger(ledger, "cancelled "+a.ID)
			return nil, nil, ctx.Err()
		})
	return s
}

// upstreamLedger is the ledger of a test upstream.
type upstreamLedger string

// lines are the ledger's complete lines.
func (l upstreamLedger) lines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(string(l))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return completeLines(b)
}

// count is how many lines of the ledger are line.
func (l upstreamLedger) count(t *testing.T, line string) int {
	t.Helper()
	n := 0
	for _, got := range l.lines(t) {
		if got == line {
			n++
		}
	}
	return n
}

// waitFor waits up to 30 s for line to be in the ledger.
func (l upstreamLedger) waitFor(t *testing.T, line string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); l.count(t, line) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream never wrote %q; ledger %q", line, l.lines(t))
		}
	}
}

// upstreamSection is the gateway section of a policy whose upstream "up" is the test upstream,
// over stdio or over HTTP (json or sse answers) in a process of its own.
func upstreamSection(t *testing.T, transport string) (string, upstreamLedger) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ledger := filepath.Join(t.TempDir(), "ledger")
	if transport == "stdio" {
		return fmt.Sprintf("gateway:\n  upstreams:\n    up:\n      command: [%q, %s, stdio, %q]\n", exe, upstreamArg, ledger), upstreamLedger(ledger)
	}
	cmd := exec.Command(exe, upstreamArg, "http", ledger, transport)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the HTTP upstream printed no URL: %v", err)
	}
	return fmt.Sprintf("gateway:\n  upstreams:\n    up:\n      url: %s\n", strings.TrimSpace(url)), upstreamLedger(ledger)
}

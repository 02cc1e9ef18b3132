// Command payments is a payments-like MCP server spoken to over stdio: the upstream of the
// gateway example (docs/gateway.md). It refunds orders, appending one line per refund it
// performs to the file named by -ledger, so a reader can count how many times a refund really
// happened.
//
// A refund whose order_id begins with "hang-" records itself in the ledger and then never
// answers, standing in for an upstream that dies mid-call after acting.
//
// With -http ADDR it serves streamable HTTP on ADDR (endpoint /mcp) instead of stdio, and
// prints the URL it listens on as its first line of standard output.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RefundArgs are the arguments of the refund tool.
type RefundArgs struct {
	OrderID string `json:"order_id" jsonschema:"the order to refund"`
	Amount  int    `json:"amount" jsonschema:"the amount in cents"`
}

// Refund is the refund tool's result.
type Refund struct {
	RefundID string `json:"refund_id"`
	OrderID  string `json:"order_id"`
	Amount   int    `json:"amount"`
}

// BalanceArgs are the arguments of the balance tool.
type BalanceArgs struct {
	Account string `json:"account"`
}

// Balance is the balance tool's result.
type Balance struct {
	Account string `json:"account"`
	Cents   int    `json:"cents"`
}

type ledger struct {
	mu   sync.Mutex
	path string
	n    int
}

func (l *ledger) append(line string) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if l.path == "" {
		return l.n, nil
	}
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	_, err = fmt.Fprintf(f, "%d %s\n", os.Getpid(), line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return l.n, err
}

func main() {
	path := flag.String("ledger", "", "append a line per refund performed to this file")
	addr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	flag.Parse()
	l := &ledger{path: *path}
	s := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "refund", Description: "Refund an order."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a RefundArgs) (*mcp.CallToolResult, Refund, error) {
			if a.Amount <= 0 {
				// Checked before anything is done: the refund did not happen.
				return nil, Refund{}, errors.New("amount must be positive")
			}
			n, err := l.append(fmt.Sprintf("refund %s %d", a.OrderID, a.Amount))
			if err != nil {
				return nil, Refund{}, err
			}
			if strings.HasPrefix(a.OrderID, "hang-") {
				<-ctx.Done() // acted, and never answers
				return nil, Refund{}, ctx.Err()
			}
			return nil, Refund{RefundID: fmt.Sprintf("re_%d", n), OrderID: a.OrderID, Amount: a.Amount}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "balance", Description: "Read an account's balance.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, a BalanceArgs) (*mcp.CallToolResult, Balance, error) {
			return nil, Balance{Account: a.Account, Cents: 12345}, nil
		})
	if *addr != "" {
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("http://%s/mcp\n", ln.Addr())
		mux := http.NewServeMux()
		mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
		log.Fatal(http.Serve(ln, mux))
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

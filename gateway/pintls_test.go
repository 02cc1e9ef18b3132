package gateway_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tlsUpstream is an https MCP upstream (a go-sdk server) that counts the HTTP requests it
// receives and the calls of its tool.
type tlsUpstream struct {
	srv      *httptest.Server
	requests atomic.Int64
	calls    atomic.Int64
}

// newTLSUpstream serves over TLS with cert, or httptest's own certificate when cert is nil.
func newTLSUpstream(t *testing.T, cert *tls.Certificate) *tlsUpstream {
	t.Helper()
	u := &tlsUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "tls-upstream"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "act", Description: "Act once."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a actArgs) (*mcp.CallToolResult, any, error) {
			u.calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.ID}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	if cert != nil {
		u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
	}
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	return u
}

// leafPin is the pin of the certificate the server presents.
func leafPin(srv *httptest.Server) string {
	sum := sha256.Sum256(srv.Certificate().Raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// selfSigned is a fresh certificate for 127.0.0.1.
func selfSigned(t *testing.T) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "swapped"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func tlsGateway(t *testing.T, url string, pins ...string) (*gateway.Gateway, error) {
	t.Helper()
	src := fmt.Sprintf("schema: latch.policy/v1\ngateway:\n  upstreams:\n    up:\n      url: %s/mcp\n      pin:\n        tls_cert_sha256: [", url)
	for i, p := range pins {
		if i > 0 {
			src += ", "
		}
		src += fmt.Sprintf("%q", p)
	}
	src += "]\nactions:\n  mcp.up.act:\n    decision: allow\n"
	pol, err := policy.Parse("latch.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	gw, err := gateway.New(t.Context(), &gateway.Config{Guard: g, Principal: latch.Principal{Agent: "bot"}})
	if err == nil {
		t.Cleanup(func() { _ = gw.Close() })
	}
	return gw, err
}

// The pinned leaf is the only trust anchor: the pinned server (whose certificate no CA vouches
// for) is reached; a server presenting another certificate fails the handshake before any
// request reaches it.
func TestPinnedTLSCertificate(t *testing.T) {
	t.Parallel()
	good := newTLSUpstream(t, nil)
	swapped := newTLSUpstream(t, selfSigned(t))
	pin := leafPin(good.srv)
	if leafPin(swapped.srv) == pin {
		t.Fatal("the two servers present one certificate")
	}
	gw, err := tlsGateway(t, good.srv.URL, "sha256:"+fmt.Sprintf("%064x", 1), pin) // a rotated-out pin beside the live one
	if err != nil {
		t.Fatalf("the pinned upstream: %v", err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := gw.Server().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up.act", Arguments: map[string]any{"id": "x"}}); err != nil {
		t.Fatalf("call through the pinned upstream: %v", err)
	}
	if n := good.calls.Load(); n != 1 {
		t.Errorf("pinned upstream calls = %d, want 1", n)
	}

	_, err = tlsGateway(t, swapped.srv.URL, pin)
	var ce *gateway.CertMismatchError
	if !errors.As(err, &ce) || ce.Observed != leafPin(swapped.srv) {
		t.Fatalf("a gateway in front of the swapped certificate = %v, want a CertMismatchError naming %s", err, leafPin(swapped.srv))
	}
	if n := swapped.requests.Load(); n != 0 {
		t.Errorf("the swapped server received %d requests, want none", n)
	}
}

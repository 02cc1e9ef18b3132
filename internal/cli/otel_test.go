package cli_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/latchkit/latch/internal/cli"
)

// otlpReceiver is a real OTLP/HTTP trace receiver on 127.0.0.1: it decodes each export request
// (protobuf, as the exporter sends by default) and keeps its spans with their service name.
type otlpReceiver struct {
	url   string
	mu    sync.Mutex
	spans []receivedSpan
	paths []string
}

type receivedSpan struct {
	service string
	span    *tracepb.Span
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rcv := &otlpReceiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if ct := r.Header.Get("Content-Type"); r.Method != http.MethodPost || ct != "application/x-protobuf" {
			t.Errorf("OTLP receiver: %s %s with Content-Type %q, want POST application/x-protobuf", r.Method, r.URL.Path, ct)
			http.Error(w, "want protobuf", http.StatusUnsupportedMediaType)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Errorf("OTLP receiver: the export request does not decode: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		rcv.paths = append(rcv.paths, r.URL.Path)
		for _, rs := range req.GetResourceSpans() {
			var service string
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					rcv.spans = append(rcv.spans, receivedSpan{service: service, span: sp})
				}
			}
		}
		rcv.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	rcv.url = "http://" + ln.Addr().String()
	return rcv
}

func (r *otlpReceiver) received() ([]receivedSpan, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans), slices.Clone(r.paths)
}

// TestServeExportsSpans runs `latch serve` as a real process exporting over OTLP/HTTP to a real
// receiver — once told by --otel-endpoint, once by the standard environment variables — and
// makes a real call that needs an approval: its spans (decide, approve, reserve, execute,
// record, under begin and finish) arrive, named for the pipeline steps, as service latch, in
// the trace of the caller's traceparent.
func TestServeExportsSpans(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"flag", "env"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			rcv := startOTLPReceiver(t)
			latchBin, policy := latchDir(t, "schema: latch.policy/v1\nactions:\n  refund.issue:\n    effect: \"refund:{id}\"\n    decision: approve\n")
			env := otelFreeEnv()
			agent, approver := createToken(t, latchBin, env, policy, "--agent", "refunder"), createToken(t, latchBin, env, policy, "--approver", "alice")
			args := []string{"--policy", policy, "serve", "--no-console"}
			srvEnv := env
			if how == "flag" {
				args = append(args, "--otel-endpoint", rcv.url)
			} else {
				srvEnv = append(slices.Clone(env), "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.url, "OTEL_BSP_SCHEDULE_DELAY=100")
			}
			p := startServe(t, latchBin, srvEnv, args...)
			srv, stderr, base := p.cmd, p.stderr, p.base
			// The caller's trace: the server's spans must join it.
			const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
			call := func(method, path, token, body string, traced bool) map[string]any {
				t.Helper()
				req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				if traced {
					req.Header.Set("Traceparent", "00-"+traceID+"-"+parentID+"-01")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var out map[string]any
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode >= 300 || json.Unmarshal(b, &out) != nil {
					t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, b)
				}
				return out
			}
			asked := call("POST", "/v1/actions", agent, `{"action":"refund.issue","arguments":{"id":"r1"}}`, true)
			apr, _ := asked["approval_id"].(string)
			if asked["status"] != "approval_required" || apr == "" {
				t.Fatalf("POST /v1/actions = %v, want approval_required", asked)
			}
			call("POST", "/v1/approvals/"+apr+"/approve", approver, `{}`, false)
			begun := call("POST", "/v1/actions", agent, fmt.Sprintf(`{"action":"refund.issue","arguments":{"id":"r1"},"approval_id":%q}`, apr), true)
			id, _ := begun["action_id"].(string)
			if begun["status"] != "reserved" || id == "" {
				t.Fatalf("POST /v1/actions with the approval = %v, want reserved", begun)
			}
			rec := call("POST", "/v1/actions/"+id+"/outcome", agent, `{"outcome":"committed","result":{"refund":"re_1"}}`, true)
			if rec["result"] != "committed" {
				t.Fatalf("outcome = %v", rec)
			}
			// SIGTERM: the server stops and sends the spans still queued before it exits.
			if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := srv.Wait(); err != nil {
				t.Fatalf("serve: %v\n%s", err, stderr.String())
			}
			spans, paths := rcv.received()
			names := map[string]int{}
			for _, s := range spans {
				names[s.span.GetName()]++
				if s.service != "latch" {
					t.Errorf("span %s from service %q, want latch", s.span.GetName(), s.service)
				}
				if hex.EncodeToString(s.span.GetTraceId()) != traceID && s.span.GetName() != "latch.approve" {
					// Only the approval answer (no traceparent sent) is in a trace of its own.
					t.Errorf("span %s in trace %x, want the caller's %s", s.span.GetName(), s.span.GetTraceId(), traceID)
				}
				if n := s.span.GetName(); (n == "latch.begin" || n == "latch.finish") && hex.EncodeToString(s.span.GetParentSpanId()) != parentID {
					t.Errorf("span %s has parent %x, want the caller's span %s", n, s.span.GetParentSpanId(), parentID)
				}
			}
			for _, want := range []string{"latch.begin", "latch.decide", "latch.approve", "latch.reserve", "latch.finish", "latch.execute", "latch.record"} {
				if names[want] == 0 {
					t.Errorf("no %s span received; got %v\n%s", want, names, stderr.String())
				}
			}
			for _, p := range paths {
				if p != "/v1/traces" {
					t.Errorf("export posted to %s, want /v1/traces", p)
				}
			}
			if !strings.Contains(stderr.String(), "exporting spans over OTLP/HTTP") {
				t.Errorf("serve did not say where its spans go:\n%s", stderr.String())
			}
		})
	}
}

// otelFreeEnv is cleanEnv without OpenTelemetry's variables, so that the test's own
// environment cannot redirect the spans.
func otelFreeEnv() []string {
	var env []string
	for _, kv := range cleanEnv() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}

// TestServeSpanExportRefusals: a --otel-endpoint or an OpenTelemetry variable latch serve cannot
// honour is a usage error naming it (exit 2), before anything is served.
func TestServeSpanExportRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"not http", []string{"--otel-endpoint", "ftp://127.0.0.1:4318"}, nil, `--otel-endpoint "ftp://127.0.0.1:4318": want an http:// or https:// URL`},
		{"no host", []string{"--otel-endpoint", "http://"}, nil, `--otel-endpoint "http://": no host`},
		{"query", []string{"--otel-endpoint", "http://127.0.0.1:4318/?x=1"}, nil, "takes no query"},
		{"grpc protocol", nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "$OTEL_EXPORTER_OTLP_PROTOCOL=grpc: latch serve exports spans over OTLP/HTTP only"},
		{"traces protocol wins", nil, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "$OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc"},
		{"other exporter", nil, map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "$OTEL_TRACES_EXPORTER=zipkin: latch serve exports spans with otlp (or none)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			policy := filepath.Join(dir, "latch.yaml")
			if err := os.WriteFile(policy, []byte("schema: latch.policy/v1\nactions: {}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			args := append([]string{"--policy", policy, "--store", "sqlite:" + filepath.Join(dir, "s.db"), "serve", "--listen", "127.0.0.1:0"}, c.args...)
			code := cli.Main(context.Background(), args, &stdout, &stderr, func(k string) string { return c.env[k] })
			if code != 2 || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("latch serve %v with %v = exit %d\n%s\nwant exit 2 saying %q", c.args, c.env, code, stderr.String(), c.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "s.db")); err == nil {
				t.Errorf("the store was created although serve refused to start")
			}
		})
	}
}

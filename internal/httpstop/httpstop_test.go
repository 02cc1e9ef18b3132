package httpstop_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/latchkit/latch/internal/httpstop"
)

// TestShutdownClosesFreshConnections: a server with a connection that never sent a request and
// a request in flight shuts down as soon as the request ends: the fresh connection is closed
// rather than waited on (http.Server alone waits five seconds on it), and the request in flight
// is answered whole.
func TestShutdownClosesFreshConnections(t *testing.T) {
	for _, install := range []bool{true, false} {
		name := map[bool]string{true: "installed", false: "bare"}[install]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			entered, release := make(chan struct{}), make(chan struct{})
			hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(entered)
				<-release
				_, _ = io.WriteString(w, "done")
			})}
			var fresh *httpstop.Fresh
			if install {
				fresh = httpstop.Install(hs)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- hs.Serve(ln) }()

			idle, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer idle.Close()
			answer := make(chan string, 1)
			go func() {
				res, err := http.Get("http://" + ln.Addr().String() + "/")
				if err != nil {
					answer <- "error: " + err.Error()
					return
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				answer <- string(b)
			}()
			<-entered
			if install {
				waitFor(t, func() bool { return fresh.Len() == 1 })
			}

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			stopped := make(chan error, 1)
			go func() { stopped <- hs.Shutdown(ctx) }()
			time.Sleep(50 * time.Millisecond) // the shutdown has begun, the request still runs
			close(release)
			if got := <-answer; got != "done" {
				t.Errorf("the request in flight got %q, want it answered whole", got)
			}
			err = <-stopped
			if install && err != nil {
				t.Errorf("Shutdown = %v, want nil: the fresh connection is closed, not waited on", err)
			}
			if !install && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Shutdown without httpstop = %v, want it held past its deadline by the fresh connection (the behaviour httpstop exists for)", err)
			}
			if install {
				_ = idle.SetReadDeadline(time.Now().Add(2 * time.Second))
				if _, err := idle.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
					t.Errorf("read on the fresh connection after shutdown = %v, want EOF (closed by the server)", err)
				}
			}
			_ = hs.Close()
			<-served
		})
	}
}

// TestStoppingClosesLateConnections: a connection accepted once the shutdown began is closed at
// once.
func TestStoppingClosesLateConnections(t *testing.T) {
	hs := &http.Server{}
	fresh := httpstop.Install(hs)
	if err := hs.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The shutdown's hooks run on their own goroutines: offer connections until one is refused.
	for range 200 {
		a, b := net.Pipe()
		hs.ConnState(a, http.StateNew)
		if fresh.Len() == 0 {
			_ = b.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := b.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("read across a connection accepted after the shutdown began = %v, want it closed", err)
			}
			return
		}
		hs.ConnState(a, http.StateClosed)
		_, _ = a.Close(), b.Close()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("a connection accepted after the shutdown began is still held 2s later")
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for range 200 {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met in 2s")
}

// TestHTTP2RequestInFlightFinishes: over TLS, where net/http hands a connection to its HTTP/2
// server without reporting it active, a request in flight at the shutdown is still answered
// whole: the connection is known busy once HTTP/2 serves it, and is not closed as fresh.
func TestHTTP2RequestInFlightFinishes(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "done")
	}))
	srv.EnableHTTP2 = true
	fresh := httpstop.Install(srv.Config)
	srv.StartTLS()
	defer srv.Close()
	type answer struct {
		body, proto string
		err         error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := srv.Client().Get(srv.URL)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		got <- answer{string(b), res.Proto, err}
	}()
	<-entered
	if n := fresh.Len(); n != 0 {
		t.Errorf("%d connections counted fresh while one serves a request over HTTP/2, want 0", n)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Config.Shutdown(context.Background()) }()
	time.Sleep(50 * time.Millisecond) // the shutdown has begun, the request still runs
	close(release)
	a := <-got
	if a.err != nil || a.body != "done" || a.proto != "HTTP/2.0" {
		t.Errorf("the HTTP/2 request in flight at the shutdown got %q over %s, %v; want \"done\" over HTTP/2.0", a.body, a.proto, a.err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}

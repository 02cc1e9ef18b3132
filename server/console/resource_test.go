package console_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/burst"
	"github.com/latchkit/latch/internal/consoletest"
)

// TestResourcesAfterBurst: the console takes a burst of 200 requests, eight at a time — pages
// read by a logged-in person, a megabyte of form sent to the login page, forms abandoned in the
// middle of their body — and afterwards its goroutines are back to their baseline and its live
// heap has grown by a bounded amount. (Not parallel: it counts the process's goroutines.)
func TestResourcesAfterBurst(t *testing.T) {
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	s.Ambiguous(t, 7, "connection reset by peer")
	c, csrf := login(t, s, "alice")
	tr := c.Transport.(*http.Transport)
	addr := strings.TrimPrefix(s.URL, "http://")
	get := func(path string) {
		resp, err := c.Get(s.URL + path)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Errorf("GET %s = %d", path, resp.StatusCode)
		}
	}
	get("/attention")
	tr.CloseIdleConnections()
	base := burst.Take()
	big := url.Values{"csrf": {csrf}, "name": {"mallory"}, "password": {strings.Repeat("p", 1<<20)}}.Encode()
	burst.Run(200, 8, func(i int) {
		switch i % 4 {
		case 0:
			get("/attention")
		case 1:
			get("/approvals")
		case 2:
			resp, err := c.Post(s.URL+"/login", "application/x-www-form-urlencoded", strings.NewReader(big))
			if err != nil {
				t.Errorf("POST /login: %v", err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("POST /login of a megabyte = %d", resp.StatusCode)
			}
		default:
			head := fmt.Sprintf("POST /effects/x/resolve HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n", addr, 900<<10)
			if err := burst.Abandon(addr, head, 64<<10); err != nil {
				t.Error(err)
			}
		}
	})
	tr.CloseIdleConnections()
	burst.Settled(t, "the console", base, burst.Bounds{})
}

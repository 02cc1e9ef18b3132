package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/burst"
)

// TestResourcesAfterBurst: the HTTP API of latch serve takes a burst of 200 requests, eight at a
// time — begins with small and with half-megabyte arguments, begins abandoned in the middle of
// their body, reads of the effects — and afterwards its goroutines are back to their baseline
// and its live heap has grown by a bounded amount. (Not parallel: it counts the process's
// goroutines.)
func TestResourcesAfterBurst(t *testing.T) {
	s := startWith(t, "sqlite", anyKeyPolicy, nil)
	client := &http.Client{Transport: &http.Transport{}}
	addr := strings.TrimPrefix(s.url, "http://")
	send := func(method, path, token string, body []byte) {
		req, _ := http.NewRequest(method, s.url+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", method, path, err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Errorf("%s %s = %d", method, path, resp.StatusCode)
		}
	}
	send("GET", "/v1/effects", s.approver, nil) // warm: the first request builds what later ones share
	client.CloseIdleConnections()
	base := burst.Take()
	pad := strings.Repeat("p", 512<<10)
	burst.Run(200, 8, func(i int) {
		switch i % 4 {
		case 0:
			send("POST", "/v1/actions", s.alice, fmt.Appendf(nil, `{"action":"any.call","arguments":{"key":"big-%d","pad":%q}}`, i, pad))
		case 1:
			head := fmt.Sprintf("POST /v1/actions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, s.alice, 600<<10)
			if err := burst.Abandon(addr, head, 100<<10); err != nil {
				t.Error(err)
			}
		case 2:
			send("GET", "/v1/effects", s.approver, nil)
		default:
			send("POST", "/v1/actions", s.alice, fmt.Appendf(nil, `{"action":"any.call","arguments":{"key":"small-%d"}}`, i))
		}
	})
	client.CloseIdleConnections()
	burst.Settled(t, "latch serve's API", base, burst.Bounds{})
}

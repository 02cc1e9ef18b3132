package latchhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/latchhttp"
)

// Each way an outbound call can end, as an executor returns it to latch.
func Example() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/declined":
			w.WriteHeader(http.StatusPaymentRequired)
			io.WriteString(w, `{"error":"card_declined"}`)
		case "/overloaded":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	defer api.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there

	describe := func(url string) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(`{"amount":24900}`))
		resp, err := latchhttp.Do(req)
		var se *latchhttp.StatusError
		switch {
		case err == nil:
			resp.Body.Close()
			fmt.Println("committed:", resp.Status)
		case errors.Is(err, latch.ErrNotExecuted) && errors.As(err, &se):
			fmt.Println("not executed, refused:", se.Status, se.Excerpt)
		case errors.Is(err, latch.ErrNotExecuted):
			fmt.Println("not executed, never sent")
		case errors.As(err, &se):
			fmt.Println("unknown:", se.Status)
		default:
			fmt.Println("unknown: sent, no response")
		}
	}
	describe(api.URL + "/charges")
	describe(api.URL + "/declined")
	describe(api.URL + "/overloaded")
	describe(down + "/charges")
	// Output:
	// committed: 201 Created
	// not executed, refused: 402 Payment Required {"error":"card_declined"}
	// unknown: 503 Service Unavailable
	// not executed, never sent
}

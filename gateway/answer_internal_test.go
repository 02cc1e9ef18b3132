package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// The stand-in of a message too large to keep, for messages as SDKs write them: members in any
// order, keys named id or isError deeper down, escapes in strings.
func TestAnswerScanStandIn(t *testing.T) {
	t.Parallel()
	pad := strings.Repeat("x", 300)
	tests := []struct {
		name, msg string
		want      string // what the stand-in is: tool, tool_error, error, dropped
		id        string
	}{
		{"tool result", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + pad + `"}]}}`, "tool", "7"},
		{"result first, id last", `{"result":{"content":[{"type":"text","text":"` + pad + `"}],"isError":false},"jsonrpc":"2.0","id":"abc"}`, "tool", `"abc"`},
		{"isError", `{"jsonrpc":"2.0","id":3,"result":{"isError":true,"content":[{"type":"text","text":"` + pad + `"}]}}`, "tool_error", "3"},
		{"isError after content", `{"id":3,"result":{"content":[],"structuredContent":{"isError":false,"id":9},"isError" : true}}`, "tool_error", "3"},
		{"keys in strings", `{"id":4,"result":{"content":[{"type":"text","text":"\"id\":5,\"isError\":true,\\"}]}}`, "tool", "4"},
		{"nested id", `{"result":{"content":[{"id":99}],"meta":{"id":98}},"id":12}`, "tool", "12"},
		{"tool list", `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"` + pad + `"}]}}`, "error", "1"},
		{"error answer", `{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"` + pad + `"}}`, "error", "2"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + pad + `"}}`, "dropped", ""},
		{"request", `{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{"x":"` + pad + `"}}`, "dropped", ""},
		{"id an object", `{"id":{"a":1},"result":{"content":[]}}`, "dropped", ""},
		{"not JSON", pad, "dropped", ""},
	}
	for _, tt := range tests {
		sc := newAnswerScan()
		for _, b := range []byte(tt.msg) { // byte by byte: no state may depend on chunking
			_, _ = sc.Write([]byte{b})
		}
		var got struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
			Result *struct {
				IsError bool                       `json:"isError"`
				Meta    map[string]json.RawMessage `json:"_meta"`
			} `json:"result"`
		}
		standIn := sc.standIn(1000, "nonce")
		if err := json.Unmarshal(standIn, &got); err != nil {
			t.Fatalf("%s: stand-in %s: %v", tt.name, standIn, err)
		}
		var kind string
		switch {
		case got.Result != nil && got.Result.IsError:
			kind = "tool_error"
		case got.Result != nil && got.Result.Meta[metaKey] != nil:
			kind = "tool"
		case got.Error != nil:
			kind = "error"
		case got.Method == "notifications/message" && got.ID == nil:
			kind = "dropped"
		}
		if kind != tt.want || string(got.ID) != tt.id {
			t.Errorf("%s: stand-in %s is %q with id %s, want %q with id %s", tt.name, standIn, kind, got.ID, tt.want, tt.id)
		}
		sum := sha256.Sum256([]byte(tt.msg))
		if a := sc.info(1000, ""); a.Bytes != int64(len(tt.msg)) || a.SHA256 != "sha256:"+hex.EncodeToString(sum[:]) {
			t.Errorf("%s: info = %+v, want %d bytes and the message's sha256", tt.name, a, len(tt.msg))
		}
	}
}

// The filters pass what fits unchanged and replace what does not, message by message.
func TestFilters(t *testing.T) {
	t.Parallel()
	const limit = 4096
	small := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`
	big := `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"` + strings.Repeat("y", 3*limit) + `"}]}}`
	readAll := func(r io.Reader) string {
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	t.Run("lines", func(t *testing.T) {
		t.Parallel()
		in := small + "\n" + big + "\n" + small + "\n"
		out := readAll(newLineFilter(io.NopCloser(strings.NewReader(in)), limit, "n"))
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 3 || lines[0] != small || lines[2] != small || !strings.Contains(lines[1], metaKey) || len(lines[1]) > 1024 {
			t.Errorf("filtered lines = %q", out)
		}
	})
	t.Run("sse", func(t *testing.T) {
		t.Parallel()
		// An event that fits; one whose one data line does not; one whose data, split over many
		// short lines, adds up to more than the limit.
		var split strings.Builder
		for i := 0; i < 8; i++ {
			split.WriteString("data: " + strings.Repeat(" ", 1000) + "\n")
		}
		split.WriteString("data: " + big + "\n")
		in := "id: a\ndata: " + small + "\n\n" + "event: message\nid: b\ndata: " + big + "\n\n" + "id: c\n" + split.String() + "\n" + "data: " + small + "\n\n"
		out := readAll(newSSEFilter(io.NopCloser(strings.NewReader(in)), limit, "n"))
		events := strings.Split(strings.TrimSuffix(out, "\n\n"), "\n\n")
		if len(events) != 4 {
			t.Fatalf("filtered events = %q", out)
		}
		if events[0] != "id: a\ndata: "+small || events[3] != "data: "+small {
			t.Errorf("events that fit were changed: %q, %q", events[0], events[3])
		}
		for i, want := range []string{"event: message\nid: b\ndata: {", "id: c\ndata: {"} {
			if ev := events[i+1]; !strings.HasPrefix(ev, want) || !strings.Contains(ev, metaKey) || len(ev) > 1024 {
				t.Errorf("event %d = %q, want its fields and a stand-in", i+1, ev)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		if got := readAll(jsonBody(io.NopCloser(strings.NewReader(small)), limit, "n")); got != small {
			t.Errorf("a body that fits = %q", got)
		}
		got := readAll(jsonBody(io.NopCloser(strings.NewReader(big)), limit, "n"))
		if !strings.Contains(got, metaKey) || !bytes.Contains([]byte(got), []byte(`"id":2`)) {
			t.Errorf("a body too large = %q, want its stand-in", got)
		}
	})
}

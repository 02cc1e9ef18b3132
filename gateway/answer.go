package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"net/http"
	"os/exec"
	"syscall"
	"time"

	"github.com/latchkit/latch"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An upstream's answer is read through a filter before the MCP SDK decodes it. A message of at
// most Config.MaxAnswer bytes passes unchanged. A longer one is never held: the filter reads
// through it with answerScan, which keeps its size, its SHA-256 and the few fields a stand-in
// needs, and hands the SDK a short stand-in message in its place:
//
//   - a tool's result (a result with content) that does not say isError: a result carrying
//     the answer's size and hash under the _meta key metaKey, with the gateway's nonce, so the
//     gateway knows its own stand-in from a look-alike an upstream sent. The tool ran: the call
//     is committed with a marker result (answerMarker), which is what the store keeps.
//   - a tool's result that says isError: a result that says isError too, so the tool's
//     errors_mean decides its outcome as it would the whole answer's.
//   - an error answer, or the result of anything but a tool call (a tools/list too long to
//     read): a JSON-RPC error answer naming the size and the limit.
//   - anything else (a notification or request of the upstream's): a log notification in its
//     place; the message itself is dropped.
//
// So the memory an answer takes is bounded by the limit, whatever the upstream sends, and a
// tool that acted is never recorded failed, or retried, because its answer was long.

// metaKey is the _meta key of the stand-in and of the marker of an answer too large to keep.
const metaKey = "latch/answer_too_large"

// MinMaxAnswer is the smallest Config.MaxAnswer: an upstream's handshake and a short tool list
// must fit.
const MinMaxAnswer = 4 << 10

// standInRoom is what the SDK's own frame limits allow beyond Config.MaxAnswer: a stand-in and
// the fields of an SSE event around a message of the limit's size fit in it.
const standInRoom = 64 << 10

// answerInfo says what an answer too large to keep was.
type answerInfo struct {
	Bytes  int64  `json:"bytes"`           // its size, as the upstream sent it
	Limit  int64  `json:"limit"`           // Config.MaxAnswer
	SHA256 string `json:"sha256"`          // sha256:<hex> of its bytes
	Nonce  string `json:"nonce,omitempty"` // the gateway's: set in a stand-in, never stored
}

// tooLarge reports whether r is the gateway's stand-in for a tool result too large to keep.
func (g *Gateway) tooLarge(r *mcp.CallToolResult) (answerInfo, bool) {
	v, ok := r.Meta[metaKey]
	if !ok {
		return answerInfo{}, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return answerInfo{}, false
	}
	var a answerInfo
	if json.Unmarshal(b, &a) != nil || a.Nonce != g.nonce {
		return answerInfo{}, false // an upstream's own _meta, however it looks
	}
	a.Nonce = ""
	return a, true
}

// answerMarker is the result stored, and handed to later duplicates, in place of an answer too
// large to keep.
func answerMarker(a answerInfo) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("latch gateway: the tool ran, and its answer of %d bytes is more than the "+
			"gateway keeps (%d bytes): it was read through but not kept (%s)", a.Bytes, a.Limit, a.SHA256)}},
		Meta: mcp.Meta{metaKey: a},
	}
}

// tooLargeRefusal is what the agent is told of a call committed with an answer too large to
// keep: not a result it could take for the tool's, but an error that says the tool ran.
func tooLargeRefusal(action string, rc *latch.Receipt, marker *mcp.CallToolResult, a answerInfo) (int64, Refusal) {
	r := Refusal{Reason: "answer_too_large", Action: action, EffectState: "committed",
		Detail: fmt.Sprintf("the tool ran (committed: do not call it again), but its answer was %d bytes, more than the gateway's limit of %d: "+
			"it was not kept (%s)", a.Bytes, a.Limit, a.SHA256)}
	if rc != nil {
		r.ReceiptID, r.ActionID, r.EffectKey = rc.ReceiptID, rc.ActionID, rc.EffectKey
	}
	if b, err := json.Marshal(marker); err == nil {
		r.Result = b
	}
	if r.EffectKey == "" {
		r.EffectState = "" // no effect record: the receipt alone says committed
	}
	return CodeAnswerTooLarge, r
}

// answerScan reads a message too large to hold, byte by byte, keeping its size, its hash and
// what its stand-in needs: the top-level id, whether it has result, error or method, and
// whether its result has content and says isError. It holds a few hundred bytes whatever it
// reads, and never fails: what it cannot make sense of gets the stand-in of a dropped message.
type answerScan struct {
	h     hash.Hash
	n     int64
	depth int
	// The containers at depths 1 (the message) and 2 (its members' values).
	obj     [3]bool   // the container at depth d is an object
	wantKey [3]bool   // the object at depth d expects a key next
	key     [3][]byte // the last key read at depth d
	inStr   bool
	esc     bool
	inKey   bool
	// The value being kept (the id, or the result's isError), and the one a colon announced.
	pending, keeping int
	val              []byte
	valLong          bool
	id, isError      []byte
	result, rpcError bool
	method, content  bool
}

// What answerScan keeps of a value.
const (
	keepNone = iota
	keepID
	keepIsError
)

// maxKept bounds the bytes answerScan keeps of a key or a value.
const maxKept = 256

func newAnswerScan() *answerScan { return &answerScan{h: sha256.New()} }

// Write reads the next bytes of the message.
func (s *answerScan) Write(p []byte) (int, error) {
	s.h.Write(p)
	s.n += int64(len(p))
	for _, c := range p {
		s.byte(c)
	}
	return len(p), nil
}

func (s *answerScan) byte(c byte) {
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.inStr = false
			if s.inKey {
				s.inKey = false
				s.keyRead()
				return
			}
			s.keep(c)
			s.endValue()
			return
		}
		if s.inKey {
			if k := &s.key[s.depth]; len(*k) <= maxKept {
				*k = append(*k, c)
			}
		} else {
			s.keep(c)
		}
		return
	}
	d := s.depth
	inObj := d >= 1 && d <= 2 && s.obj[d]
	switch c {
	case ' ', '\t', '\r', '\n':
		if s.keeping != keepNone {
			s.endValue() // a number or literal ended
		}
	case '"':
		s.inStr = true
		if inObj && s.wantKey[d] {
			s.inKey, s.key[d] = true, s.key[d][:0]
			return
		}
		s.startValue()
		s.keep(c)
	case ':':
		if inObj {
			s.wantKey[d] = false
			s.pending = s.target()
		}
	case ',':
		s.endValue()
		if inObj {
			s.wantKey[d] = true
		}
	case '{', '[':
		s.endValue()
		s.pending = keepNone // a container is never kept
		s.depth++
		if s.depth <= 2 {
			s.obj[s.depth], s.wantKey[s.depth], s.key[s.depth] = c == '{', c == '{', s.key[s.depth][:0]
		}
	case '}', ']':
		s.endValue()
		s.depth--
	default: // a byte of a number or a literal
		if s.keeping == keepNone {
			s.startValue()
		}
		s.keep(c)
	}
}

// target is what to keep of the value of the key just read.
func (s *answerScan) target() int {
	switch {
	case s.depth == 1 && string(s.key[1]) == "id":
		return keepID
	case s.depth == 2 && string(s.key[1]) == "result" && string(s.key[2]) == "isError":
		return keepIsError
	}
	return keepNone
}

// keyRead notes the members that decide the stand-in.
func (s *answerScan) keyRead() {
	switch k := string(s.key[s.depth]); {
	case s.depth == 1 && k == "result":
		s.result = true
	case s.depth == 1 && k == "error":
		s.rpcError = true
	case s.depth == 1 && k == "method":
		s.method = true
	case s.depth == 2 && string(s.key[1]) == "result" && k == "content":
		s.content = true
	}
}

func (s *answerScan) startValue() {
	s.keeping, s.pending = s.pending, keepNone
	s.val, s.valLong = s.val[:0], false
}

func (s *answerScan) keep(c byte) {
	if s.keeping == keepNone {
		return
	}
	if len(s.val) >= maxKept {
		s.valLong = true
		return
	}
	s.val = append(s.val, c)
}

func (s *answerScan) endValue() {
	if s.keeping != keepNone && !s.valLong {
		v := bytes.Clone(s.val)
		if s.keeping == keepID {
			s.id = v
		} else {
			s.isError = v
		}
	}
	s.keeping, s.pending = keepNone, keepNone
}

// info is the size and hash of what was read.
func (s *answerScan) info(limit int64, nonce string) answerInfo {
	return answerInfo{Bytes: s.n, Limit: limit, SHA256: "sha256:" + hex.EncodeToString(s.h.Sum(nil)), Nonce: nonce}
}

// standIn is the message the SDK decodes in place of the one read (see the top of this file).
func (s *answerScan) standIn(limit int64, nonce string) []byte {
	a := s.info(limit, nonce)
	id := s.validID()
	var msg any
	switch {
	case id != nil && s.result && !s.rpcError && s.content && string(s.isError) == "true":
		msg = map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"isError": true, "content": []any{map[string]any{"type": "text",
			"text": fmt.Sprintf("the tool's error answer was %d bytes, more than the gateway's limit of %d: it was not kept (%s)", a.Bytes, a.Limit, a.SHA256)}}}}
	case id != nil && s.result && !s.rpcError && s.content:
		msg = map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"content": []any{map[string]any{"type": "text",
			"text": "answer too large to keep"}}, "_meta": map[string]any{metaKey: a}}}
	case id != nil && (s.result || s.rpcError) && !s.method:
		msg = map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32603,
			"message": fmt.Sprintf("latch gateway: the upstream's answer was %d bytes, more than the gateway's limit of %d (raise it with --max-answer): it was not kept (%s)", a.Bytes, a.Limit, a.SHA256)}}
	default:
		msg = map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "warning", "logger": "latch-gateway",
			"data": fmt.Sprintf("dropped a message of %d bytes from the upstream: more than the gateway's limit of %d", a.Bytes, a.Limit)}}
	}
	b, _ := json.Marshal(msg) // maps of strings, numbers and raw JSON: always encodes
	return b
}

// validID is the id read, when it is a JSON string or number.
func (s *answerScan) validID() json.RawMessage {
	if len(s.id) == 0 || !json.Valid(s.id) {
		return nil
	}
	switch s.id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return json.RawMessage(s.id)
	}
	return nil
}

// readLine reads through the next newline. A line of at most limit bytes (its newline aside) is
// appended to buf and returned; a longer one is written to the scanner over(head) returns —
// head is what was read of the line when it passed the limit — and (buf, true) returned with
// nothing appended. err is the reader's: io.EOF after a last line without a newline.
func readLine(r *bufio.Reader, limit int64, buf []byte, over func(head []byte) io.Writer) ([]byte, bool, error) {
	start := len(buf)
	var w io.Writer
	for {
		chunk, err := r.ReadSlice('\n')
		if w != nil {
			_, _ = w.Write(bytes.TrimRight(chunk, "\r\n"))
		} else {
			buf = append(buf, chunk...) // at most limit and one chunk of the reader's buffer
			if int64(len(bytes.TrimRight(buf[start:], "\r\n"))) > limit {
				w = over(bytes.TrimRight(buf[start:], "\r\n"))
				buf = buf[:start]
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, w != nil, err
	}
}

// lineFilter is the filter over newline-delimited JSON (a stdio upstream's standard output).
type lineFilter struct {
	r      *bufio.Reader
	limit  int64
	nonce  string
	buf    []byte // the current line: at most limit bytes and its newline
	out    []byte // what Read has still to hand on
	err    error
	closer io.Closer
}

func newLineFilter(r io.ReadCloser, limit int64, nonce string) *lineFilter {
	return &lineFilter{r: bufio.NewReaderSize(r, 64<<10), limit: limit, nonce: nonce, closer: r}
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		var sc *answerScan
		line, over, err := readLine(f.r, f.limit, f.buf[:0], func(head []byte) io.Writer {
			sc = newAnswerScan()
			_, _ = sc.Write(head)
			return sc
		})
		f.buf, f.err = line, err
		if over {
			f.out = append(sc.standIn(f.limit, f.nonce), '\n')
		} else {
			f.out = line
		}
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

func (f *lineFilter) Close() error { return f.closer.Close() }

// sseFilter is the filter over a text/event-stream body (a streamable-HTTP upstream's
// answers): an event whose fields add up to more than limit bytes is replaced by an event whose
// data is the stand-in of its data.
type sseFilter struct {
	r      *bufio.Reader
	limit  int64
	nonce  string
	ev     []byte      // the current event's lines, while they fit in limit
	sc     *answerScan // the current event's data, once the event passed the limit
	fields []byte      // the event's other fields (id, event), kept for its stand-in
	data   bool        // the scan has had a data line of the event
	out    []byte
	err    error
	closer io.Closer
}

func newSSEFilter(r io.ReadCloser, limit int64, nonce string) *sseFilter {
	return &sseFilter{r: bufio.NewReaderSize(r, 64<<10), limit: limit, nonce: nonce, closer: r}
}

func (f *sseFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.next()
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// next reads one line of the stream, and hands on an event when its blank line ends it.
func (f *sseFilter) next() {
	start := len(f.ev)
	room := f.limit - int64(start)
	if f.sc != nil {
		room = f.limit // the event passed the limit already: each further line is read on its own
	}
	ev, over, err := readLine(f.r, room, f.ev, f.overflow)
	f.err = err
	var line []byte
	switch {
	case over:
		f.ev = ev[:0] // the event's lines went to the scan
	case f.sc != nil:
		line = ev[start:]
		f.field(line, true)
		f.ev = ev[:0]
	default:
		f.ev, line = ev, ev[start:]
	}
	if !over && len(bytes.TrimRight(line, "\r\n")) == 0 || err != nil {
		f.flush()
	}
}

// overflow turns the event buffered so far, and head (the start of the line that passed the
// limit), into a scan of the event's data, and returns where the rest of the line goes.
func (f *sseFilter) overflow(head []byte) io.Writer {
	if f.sc == nil {
		f.sc = newAnswerScan()
		for ln := range bytes.Lines(f.ev) {
			f.field(ln, true)
		}
	}
	if !f.field(head, false) {
		return io.Discard // a long comment, or a field the SDK ignores
	}
	return dataWriter{f}
}

// field takes one line (whole, or the start of one) of an event that passed the limit, and
// reports whether it is data: data goes to the scan, joined by newlines as SSE joins it; id
// and event are kept for the stand-in.
func (f *sseFilter) field(line []byte, whole bool) bool {
	line = bytes.TrimRight(line, "\r\n")
	name, value, ok := bytes.Cut(line, []byte(":"))
	switch {
	case !ok:
	case string(name) == "data":
		if f.data {
			_, _ = f.sc.Write([]byte("\n"))
		}
		f.data = true
		if whole {
			value = bytes.TrimSpace(value)
		} else {
			value = bytes.TrimLeft(value, " ")
		}
		_, _ = f.sc.Write(value)
		return true
	case (string(name) == "id" || string(name) == "event") && len(line) <= maxKept:
		f.fields = append(append(f.fields, line...), '\n')
	}
	return false
}

// dataWriter writes the rest of a line longer than the limit to the event's scan, as data.
type dataWriter struct{ f *sseFilter }

func (w dataWriter) Write(p []byte) (int, error) { return w.f.sc.Write(p) }

// flush hands on the event read: whole, or as its stand-in.
func (f *sseFilter) flush() {
	if f.sc == nil {
		f.out, f.ev = f.ev, f.ev[:0]
		return
	}
	out := append(f.fields, "data: "...)
	out = append(out, f.sc.standIn(f.limit, f.nonce)...)
	f.out = append(out, "\n\n"...)
	f.sc, f.fields, f.ev, f.data = nil, nil, f.ev[:0], false
}

func (f *sseFilter) Close() error { return f.closer.Close() }

// jsonBody reads an application/json answer: whole when it fits in limit, else its stand-in.
func jsonBody(body io.ReadCloser, limit int64, nonce string) io.ReadCloser {
	head, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil || int64(len(head)) <= limit {
		return readCloser{io.MultiReader(bytes.NewReader(head), errReader{err}), body}
	}
	sc := newAnswerScan()
	_, _ = sc.Write(head)
	if _, err := io.Copy(sc, body); err != nil {
		return readCloser{errReader{err}, body}
	}
	return readCloser{bytes.NewReader(sc.standIn(limit, nonce)), body}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// errReader returns its error, or io.EOF when it has none.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) {
	if r.err == nil {
		return 0, io.EOF
	}
	return 0, r.err
}

// limitTransport puts the answers of a streamable-HTTP upstream through the filters.
type limitTransport struct {
	base  http.RoundTripper
	limit int64
	nonce string
}

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "text/event-stream":
		resp.Body = newSSEFilter(resp.Body, t.limit, t.nonce)
	case "application/json":
		resp.Body = jsonBody(resp.Body, t.limit, t.nonce)
	default: // an error page: what the SDK reads of it is bounded too
		resp.Body = readCloser{io.LimitReader(resp.Body, t.limit), resp.Body}
	}
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return resp, nil
}

// commandTransport runs a stdio upstream as mcp.CommandTransport does, with its standard
// output read through a lineFilter.
type commandTransport struct {
	cmd   *exec.Cmd
	limit int64
	nonce string
}

// terminateAfter is how long closing a stdio upstream waits for it to exit once its standard
// input is closed, and again after SIGTERM, before it is killed.
const terminateAfter = 5 * time.Second

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	r := newLineFilter(io.NopCloser(stdout), t.limit, t.nonce) // the connection closes by stdin
	tr := &mcp.IOTransport{Reader: r, Writer: &process{cmd: t.cmd, stdin: stdin}, MaxLineLength: int(t.limit + standInRoom)}
	return tr.Connect(ctx)
}

// process is a stdio upstream's standard input; closing it ends the process: its input is
// closed, then it is sent SIGTERM, then killed, each after terminateAfter.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *process) Close() error {
	if err := p.stdin.Close(); err != nil {
		return fmt.Errorf("close the upstream's stdin: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-exited:
			return err, true
		case <-time.After(terminateAfter):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if p.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("the upstream process does not exit")
}

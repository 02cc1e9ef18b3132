package receipt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/latchkit/latch/canon"
)

// Break kinds, in the order a walk can find them.
const (
	BreakMissing        = "missing"         // a seq is absent from the chain
	BreakLinkBroken     = "link_broken"     // prev_hash differs from the predecessor's stored hash
	BreakContentAltered = "content_altered" // the document no longer hashes to its stored hash
	BreakHeadMismatch   = "head_mismatch"   // the head differs from the last receipt
	BreakIndexMismatch  = "index_mismatch"  // a column the store looks receipts up by differs from the document
	// BreakStateDiverged: a stored record (an effect, an approval, a delegation) differs from
	// the state the chain implies for it. Seq is the last record that asserts that state (0 when
	// the chain asserts none); Subject names the record; Chain and Table are the two values.
	BreakStateDiverged = "state_diverged"
	// BreakStartMismatch: the first receipt of a pruned chain is not the one its prune kept: it
	// no longer hashes to the hash the checkpoint it was pruned below signed.
	BreakStartMismatch = "start_mismatch"
)

// Start is where a pruned chain begins (docs/retention.md): the receipt at Seq, kept by a prune
// as the new genesis, must hash to Hash, the hash a signed checkpoint signed; its prev_hash names
// a receipt that was removed, so it is not checked. Reason says why the chain starts there, for
// a reader ("pruned below the checkpoint signed at … on …").
type Start struct {
	Seq    int64  `json:"seq"`
	Hash   string `json:"hash"`
	Reason string `json:"reason"`
}

// Break is one place where the chain, or the state it implies, does not hold.
type Break struct {
	Kind    string `json:"kind"`
	Seq     int64  `json:"seq"`
	Detail  string `json:"detail"`
	Subject string `json:"subject,omitempty"` // state_diverged: "effect KEY", "approval ID", "delegation ID"
	Chain   string `json:"chain,omitempty"`   // state_diverged: what the chain implies
	Table   string `json:"table,omitempty"`   // state_diverged: what the table holds
}

// Report is the result of Verify.
type Report struct {
	OK       bool    `json:"ok"`
	Verified int64   `json:"verified"`
	Breaks   []Break `json:"breaks"`
	// State says how much of the stored state was checked against the chain; nil when it was
	// not (a store that cannot read its state beside its chain, or a walk of documents alone).
	State *StateChecked `json:"state,omitempty"`
	// Start is where the chain starts when it was pruned, and why; nil when it starts at seq 1.
	Start *Start `json:"start,omitempty"`
}

// StateChecked counts the stored records compared with the state the chain implies. Unchained
// counts records the chain cannot speak for: written before records carried their state
// (schema v1).
type StateChecked struct {
	Effects     int64 `json:"effects"`
	Approvals   int64 `json:"approvals"`
	Delegations int64 `json:"delegations"`
	Unchained   int64 `json:"unchained"`
}

// linkFields are the two fields of a document the walk needs to read back.
type linkFields struct {
	Seq      int64  `json:"seq"`
	PrevHash string `json:"prev_hash"`
}

// Verify walks a chain in seq order and names every break by seq. rows must yield receipts in
// ascending seq order; it is consumed once, so memory stays flat however long the chain is. An
// error from rows stops the walk and is returned: a chain that could not be read is not verified.
//
// Reading a row (a database's work) and checking it (hashing its document, finding its links)
// cost about the same, so they overlap: rows are read ahead, in chunks, while a second goroutine
// checks the ones before. rows must therefore yield rows it does not change afterwards, as every
// store's Receipts does. At most verifyChunks chunks of verifyChunkRows rows are held at once.
func Verify(rows iter.Seq2[Sealed, error], head Head) (Report, error) {
	return VerifyFrom(rows, head, nil)
}

// VerifyFrom is Verify for a chain that starts at start (nil: at seq 1, after GenesisHash): its
// first receipt must be start.Seq and hash to start.Hash (else start_mismatch), and every one
// after it links as usual. A receipt below start is named content_altered: a prune removed it.
func VerifyFrom(rows iter.Seq2[Sealed, error], head Head, start *Start) (Report, error) {
	w := walk{rep: Report{Breaks: []Break{}, Start: start}, start: start}
	if start != nil {
		w.prev.Seq = start.Seq - 1
	}
	full := make(chan []Sealed, verifyChunks) // read, in order, to be checked
	free := make(chan []Sealed, verifyChunks) // checked, to be filled again
	for range verifyChunks {
		free <- make([]Sealed, 0, verifyChunkRows)
	}
	var failed atomic.Bool // the walk cannot go on: reading further is pointless
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		for chunk := range full {
			for _, row := range chunk {
				if w.err != nil {
					break
				}
				if w.err = w.step(row); w.err != nil {
					failed.Store(true)
				}
			}
			free <- chunk[:0]
		}
	}()
	var readErr error
	func() {
		defer close(full) // also when rows panics: the checker then ends
		chunk := <-free
		for row, err := range rows {
			if err != nil {
				readErr = err
				break
			}
			if chunk = append(chunk, row); len(chunk) < verifyChunkRows {
				continue
			}
			full <- chunk
			if failed.Load() {
				return
			}
			chunk = <-free
		}
		if len(chunk) > 0 {
			full <- chunk
		}
	}()
	<-checked
	switch {
	case w.err != nil:
		return Report{}, w.err
	case readErr != nil:
		return Report{}, fmt.Errorf("verify receipts: %w", readErr)
	}
	prev := w.prev
	rep := w.rep
	if head.Seq != prev.Seq || (prev.Seq > 0 && head.Hash != prev.Hash) {
		rep.Breaks = append(rep.Breaks, Break{Kind: BreakHeadMismatch, Seq: head.Seq,
			Detail: fmt.Sprintf("head is seq %d %s, last receipt is seq %d %s", head.Seq, head.Hash, prev.Seq, prev.Hash)})
	}
	rep.OK = len(rep.Breaks) == 0
	return rep, nil
}

// The read-ahead of Verify: a chunk amortizes the hand-over between the goroutines, a few
// chunks keep both busy.
const (
	verifyChunkRows = 128
	verifyChunks    = 3
)

// walk is the state of Verify between rows.
type walk struct {
	rep   Report
	prev  Sealed
	err   error  // a walk that cannot go on: rows out of order
	start *Start // where a pruned chain starts; nil: seq 1
	begun bool   // a row at or past start was read
}

// step checks one row against the one before it.
func (w *walk) step(row Sealed) error {
	w.rep.Verified++
	if w.start != nil && !w.begun && row.Seq < w.start.Seq {
		w.rep.Breaks = append(w.rep.Breaks, Break{Kind: BreakContentAltered, Seq: row.Seq,
			Detail: fmt.Sprintf("receipt %d is below the chain's start at seq %d: a prune removed it, and it is stored again", row.Seq, w.start.Seq)})
		return nil
	}
	atStart := w.start != nil && !w.begun
	w.begun = true
	want := w.prev.Seq + 1
	gap := row.Seq > want
	switch {
	case row.Seq < want:
		return fmt.Errorf("verify receipts: rows out of order: seq %d after %d", row.Seq, w.prev.Seq)
	case gap:
		for s := want; s < row.Seq; s++ {
			w.rep.Breaks = append(w.rep.Breaks, Break{Kind: BreakMissing, Seq: s, Detail: fmt.Sprintf("receipt %d is absent", s)})
		}
	}
	var lf linkFields
	var ixf indexFields
	scanned := false // lf and ixf were read by one scan of the document
	altered := ""
	if got := canon.Sum(row.Doc); got != row.Hash {
		altered = fmt.Sprintf("document hashes to %s, stored hash is %s", got, row.Hash)
	} else if row.Index != nil && scanWalk(row.Doc, &lf, &ixf) {
		scanned = true
	} else if err := readLinks(row.Doc, &lf); err != nil {
		altered = fmt.Sprintf("document unreadable: %v", err)
	}
	if altered == "" && lf.Seq != row.Seq {
		altered = fmt.Sprintf("document says seq %d, stored at seq %d", lf.Seq, row.Seq)
	}
	if altered == "" && row.Index != nil {
		detail := ""
		if scanned {
			detail = checkIndexFields(&ixf, row.Index)
		} else {
			detail = checkIndex(row.Doc, row.Index)
		}
		if detail != "" {
			w.rep.Breaks = append(w.rep.Breaks, Break{Kind: BreakIndexMismatch, Seq: row.Seq, Detail: detail})
		}
	}
	if altered != "" {
		w.rep.Breaks = append(w.rep.Breaks, Break{Kind: BreakContentAltered, Seq: row.Seq, Detail: altered})
	} else if atStart && !gap {
		// The predecessor was pruned: the kept receipt is held to the hash its checkpoint signed.
		if row.Hash != w.start.Hash {
			w.rep.Breaks = append(w.rep.Breaks, Break{Kind: BreakStartMismatch, Seq: row.Seq,
				Detail: fmt.Sprintf("the chain starts here (%s), and this receipt was kept as %s; it is stored as %s", w.start.Reason, w.start.Hash, row.Hash)})
		}
	} else if !gap {
		wantPrev := GenesisHash
		if w.prev.Seq > 0 {
			wantPrev = w.prev.Hash
		}
		if lf.PrevHash != wantPrev {
			w.rep.Breaks = append(w.rep.Breaks, Break{Kind: BreakLinkBroken, Seq: row.Seq,
				Detail: fmt.Sprintf("prev_hash %s, receipt %d is stored as %s", lf.PrevHash, row.Seq-1, wantPrev)})
		}
	}
	// Only the seq and the hash of the predecessor are needed: the document is not kept.
	w.prev = Sealed{Seq: row.Seq, Hash: row.Hash}
	return nil
}

// readLinks reads the top-level seq and prev_hash of a document into lf, exactly as
// json.Unmarshal would. A full decode costs several times the hash that precedes it, so a
// document of the shape Seal writes is scanned instead (see scanLinks); any other document is
// decoded by encoding/json, so that an odd one is judged exactly as a full decode judges it.
func readLinks(doc []byte, lf *linkFields) error {
	if seq, prev, ok := scanLinks(doc); ok {
		lf.Seq, lf.PrevHash = seq, prev
		return nil
	}
	return json.Unmarshal(doc, lf)
}

// scanLinks reads the top-level "seq" and "prev_hash" of a JSON object without decoding it.
//
// It answers (ok) only when the answer is certainly the one json.Unmarshal into linkFields would
// give, and otherwise leaves the document to it: the whole text must be valid JSON (it is checked
// byte by byte, nested values included, since a document that does not parse is unreadable, not
// intact); each of the two keys must appear exactly once, spelled exactly, unescaped (a second
// "seq" would win in encoding/json, and so would "SEQ", "Seq" or a key with non-ASCII letters,
// which it matches case-insensitively); seq must be a plain non-negative integer that fits an
// int64, and prev_hash a string of printable ASCII without escapes (encoding/json would rewrite
// invalid UTF-8). Keys nested inside other values, such as a "prev_hash" argument, are skipped
// as the values they are part of.
func scanLinks(doc []byte) (seq int64, prev string, ok bool) {
	s := linkScanner{b: doc}
	s.space()
	if !s.next('{') {
		return 0, "", false
	}
	var haveSeq, havePrev bool
	s.space()
	if s.peek() == '}' {
		return 0, "", false
	}
	for {
		s.space()
		if !s.next('"') {
			return 0, "", false
		}
		start, end, plain, good := s.str()
		if !good || !plain {
			return 0, "", false
		}
		key := doc[start:end]
		s.space()
		if !s.next(':') {
			return 0, "", false
		}
		s.space()
		switch string(key) {
		case "seq":
			if haveSeq {
				return 0, "", false
			}
			if seq, good = s.uint(); !good {
				return 0, "", false
			}
			haveSeq = true
		case "prev_hash":
			if havePrev || !s.next('"') {
				return 0, "", false
			}
			start, end, plain, good := s.str()
			if !good || !plain {
				return 0, "", false
			}
			prev, havePrev = string(doc[start:end]), true
		default:
			if foldsTo(key, "seq") || foldsTo(key, "prev_hash") {
				return 0, "", false
			}
			if !s.value(0) {
				return 0, "", false
			}
		}
		s.space()
		if s.next(',') {
			continue
		}
		if !s.next('}') {
			return 0, "", false
		}
		break
	}
	s.space()
	if s.i != len(doc) || !haveSeq || !havePrev {
		return 0, "", false
	}
	return seq, prev, true
}

// walkKeys are the top-level members a walk reads of a document with index columns: its links,
// then the fields of indexFields in order.
var walkKeys = []string{"seq", "prev_hash", "receipt_id", "action_id", "action", "effect_key", "approval_id", "result", "finished_at"}

// scanWalk reads a document's links into lf and its index fields into f in one scan (scanTop),
// exactly as readLinks and json.Unmarshal into indexFields would; false leaves the document to
// them: a link or field of another shape than the plain one Seal writes, or anything scanTop
// declines.
func scanWalk(doc []byte, lf *linkFields, f *indexFields) bool {
	var raw [9][]byte
	if !scanTop(doc, walkKeys, raw[:]) || raw[0] == nil || raw[1] == nil {
		return false
	}
	s := linkScanner{b: raw[0]}
	seq, ok := s.uint()
	if !ok || s.i != len(raw[0]) {
		return false
	}
	prev, ok := plainString(raw[1])
	if !ok {
		return false
	}
	for i, p := range []**string{&f.ReceiptID, &f.ActionID, &f.Action, &f.EffectKey, &f.ApprovalID, &f.Result, &f.FinishedAt} {
		v := raw[2+i]
		if v == nil || string(v) == "null" {
			*p = nil
			continue
		}
		str, ok := plainString(v)
		if !ok {
			return false
		}
		*p = &str
	}
	lf.Seq, lf.PrevHash = seq, prev
	return true
}

// plainString returns the contents of v, a JSON string of printable ASCII without escapes (what
// json.Unmarshal would read as it is), or false.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	s := linkScanner{b: v, i: 1}
	start, end, plain, ok := s.str()
	if !ok || !plain || s.i != len(v) {
		return "", false
	}
	return string(v[start:end]), true
}

// scanTop reads the raw values of the top-level members of doc named in keys into vals (nil for
// a member that is absent), without decoding anything. Like scanLinks, it answers only when
// json.Unmarshal would certainly read those members the same: the whole document must be valid
// JSON and an object; every key must be printable ASCII without escapes; no key may appear twice
// or be spelt as one of keys in another case (encoding/json matches keys case-insensitively, and
// the last one wins).
func scanTop(doc []byte, keys []string, vals [][]byte) bool {
	for i := range vals {
		vals[i] = nil
	}
	s := linkScanner{b: doc}
	s.space()
	if !s.next('{') {
		return false
	}
	s.space()
	if s.next('}') {
		s.space()
		return s.i == len(doc)
	}
	for {
		s.space()
		if !s.next('"') {
			return false
		}
		start, end, plain, good := s.str()
		if !good || !plain {
			return false
		}
		key := doc[start:end]
		s.space()
		if !s.next(':') {
			return false
		}
		s.space()
		at := -1
		for i, k := range keys {
			if string(key) == k {
				at = i
				break
			}
			if foldsTo(key, k) {
				return false
			}
		}
		vstart := s.i
		if !s.value(0) {
			return false
		}
		if at >= 0 {
			if vals[at] != nil {
				return false
			}
			vals[at] = doc[vstart:s.i]
		}
		s.space()
		if s.next(',') {
			continue
		}
		if !s.next('}') {
			return false
		}
		break
	}
	s.space()
	return s.i == len(doc)
}

// foldsTo reports whether key equals name under ASCII case folding (keys with other bytes
// never get here).
func foldsTo(key []byte, name string) bool {
	return len(key) == len(name) && bytes.EqualFold(key, []byte(name))
}

// maxScanDepth bounds the nesting scanLinks follows; a deeper document is left to encoding/json.
const maxScanDepth = 1000

// linkScanner is a strict JSON (RFC 8259) reader over b from offset i. Its methods return false
// on anything they do not accept, which makes scanLinks give up.
type linkScanner struct {
	b []byte
	i int
}

func (s *linkScanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// next consumes c if it is the next byte.
func (s *linkScanner) next(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *linkScanner) space() {
	// Canonical JSON has no whitespace: the common case is one comparison.
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str reads the rest of a string whose opening quote was consumed. It returns the bounds of its
// raw contents and whether they are plain: printable ASCII with no escape.
func (s *linkScanner) str() (start, end int, plain, ok bool) {
	start, plain = s.i, true
	for s.i < len(s.b) {
		// Most bytes are ordinary: skip them in a tight loop.
		b, i := s.b, s.i
		for i+8 <= len(b) && !special8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		s.i = i
		if s.i == len(s.b) {
			break
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return start, s.i - 1, plain, true
		case c < 0x20:
			return 0, 0, false, false
		case c == '\\':
			plain = false
			if s.i+1 >= len(s.b) {
				return 0, 0, false, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return 0, 0, false, false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !isHex(h) {
						return 0, 0, false, false
					}
				}
				s.i += 6
			default:
				return 0, 0, false, false
			}
		default:
			if c >= 0x7f {
				plain = false
			}
			s.i++
		}
	}
	return 0, 0, false, false
}

// plainByte marks the bytes a string holds as they are: printable ASCII but '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// special8 reports whether any of the 8 bytes in x is not a plainByte: a control character, '"',
// '\\', DEL or a byte of a multi-byte sequence. It tests them at once (the zero-byte tricks of
// "Bit Twiddling Hacks"), since strings make up most of a receipt.
func special8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, bs, del := x^'"'*ones, x^'\\'*ones, x^0x7f*ones
	return ((x-0x20*ones)&^x|x|(q-ones)&^q|(bs-ones)&^bs|(del-ones)&^del)&highs != 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// uint reads a non-negative integer with no fraction and no exponent that fits an int64.
func (s *linkScanner) uint() (int64, bool) {
	start := s.i
	var n int64
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		d := int64(s.b[s.i] - '0')
		if n > (1<<63-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
		s.i++
	}
	switch {
	case s.i == start, s.b[start] == '0' && s.i-start > 1:
		return 0, false
	case s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E'):
		return 0, false
	}
	return n, true
}

// value skips one JSON value of any kind, checking its syntax.
func (s *linkScanner) value(depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	switch c := s.peek(); {
	case c == '"':
		s.i++
		_, _, _, ok := s.str()
		return ok
	case c == '{':
		s.i++
		s.space()
		if s.next('}') {
			return true
		}
		for {
			s.space()
			if !s.next('"') {
				return false
			}
			if _, _, _, ok := s.str(); !ok {
				return false
			}
			s.space()
			if !s.next(':') {
				return false
			}
			s.space()
			if !s.value(depth + 1) {
				return false
			}
			s.space()
			if s.next('}') {
				return true
			}
			if !s.next(',') {
				return false
			}
		}
	case c == '[':
		s.i++
		s.space()
		if s.next(']') {
			return true
		}
		for {
			s.space()
			if !s.value(depth + 1) {
				return false
			}
			s.space()
			if s.next(']') {
				return true
			}
			if !s.next(',') {
				return false
			}
		}
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	case c == 't':
		return s.word("true")
	case c == 'f':
		return s.word("false")
	case c == 'n':
		return s.word("null")
	}
	return false
}

func (s *linkScanner) word(w string) bool {
	if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
		s.i += len(w)
		return true
	}
	return false
}

// number skips -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *linkScanner) number() bool {
	s.next('-')
	switch {
	case s.next('0'):
	case '1' <= s.peek() && s.peek() <= '9':
		s.digits()
	default:
		return false
	}
	if s.next('.') && !s.digits() {
		return false
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if !s.next('+') {
			s.next('-')
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits consumes one or more decimal digits.
func (s *linkScanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// indexFields are the fields of a document a store copies into its index columns.
type indexFields struct {
	ReceiptID  *string `json:"receipt_id"`
	ActionID   *string `json:"action_id"`
	Action     *string `json:"action"`
	EffectKey  *string `json:"effect_key"`
	ApprovalID *string `json:"approval_id"`
	Result     *string `json:"result"`
	FinishedAt *string `json:"finished_at"`
}

// checkIndex compares a receipt's index columns with its document (whose hash was checked) and
// describes the first column that differs, or returns "". A null or absent string is an empty
// column; finished_at is compared at the millisecond the document keeps.
func checkIndex(doc []byte, ix *Index) string {
	var f indexFields
	if err := json.Unmarshal(doc, &f); err != nil {
		return fmt.Sprintf("document unreadable: %v", err)
	}
	return checkIndexFields(&f, ix)
}

// checkIndexFields is checkIndex for the fields read from the document.
func checkIndexFields(f *indexFields, ix *Index) string {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	for _, c := range []struct{ name, column, doc string }{
		{"receipt_id", ix.ReceiptID, str(f.ReceiptID)},
		{"action_id", ix.ActionID, str(f.ActionID)},
		{"action", ix.Action, str(f.Action)},
		{"effect_key", ix.EffectKey, str(f.EffectKey)},
		{"approval_id", ix.ApprovalID, str(f.ApprovalID)},
		{"result", ix.Result, str(f.Result)},
	} {
		if c.column != c.doc {
			return fmt.Sprintf("%s column is %s, the document says %s", c.name, strconv.Quote(c.column), strconv.Quote(c.doc))
		}
	}
	var want int64
	if f.FinishedAt != nil {
		t, err := parseStamp(f.FinishedAt)
		if err != nil {
			return fmt.Sprintf("document finished_at unreadable: %v", err)
		}
		want = t.UnixMilli()
	}
	got := ix.FinishedAt
	if got != 0 {
		got = time.Unix(0, got).UnixMilli()
	}
	if got != want {
		return fmt.Sprintf("finished_at column is %s, the document says %s", millis(got), millis(want))
	}
	return ""
}

func millis(ms int64) string {
	if ms == 0 {
		return "none"
	}
	return time.UnixMilli(ms).UTC().Format(TimeFormat)
}

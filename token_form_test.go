package latch

import (
	"strings"
	"testing"

	"github.com/latchkit/latch/canon"
)

// The tokens are written without a map on the hot path; they must hash exactly the canonical
// documents they always hashed, or every token a caller stored would change.
func TestTokensHashTheirCanonicalDocuments(t *testing.T) {
	keys := []string{
		"charge:inv_1", "", "a\"b\\c", "tab\tnew\nline\x00nul\x1f", "é ünïcode ✓ 🔑", "</script>&<'",
		"\u2028\u2029", strings.Repeat("k", 300), "invalid \xff utf-8",
	}
	attempts := []int{1, 2, 9, 10, 1_000_000_007, canon.MaxSafeInt, canon.MaxSafeInt + 1, 0, -1}
	want := func(doc map[string]any) string {
		b, err := canon.Marshal(doc)
		if err != nil {
			return ""
		}
		return uuidOf(b)
	}
	for _, key := range keys {
		if got, w := effectToken(key), want(map[string]any{"schema": "latch.effect-token/v1", "effect_key": key}); got != w {
			t.Errorf("effectToken(%q) = %q, want %q", key, got, w)
		}
		for _, n := range attempts {
			if got, w := idempotencyToken(key, n), want(map[string]any{"schema": "latch.idempotency/v1", "effect_key": key, "attempt": int64(n)}); got != w {
				t.Errorf("idempotencyToken(%q, %d) = %q, want %q", key, n, got, w)
			}
		}
	}
	// A fixed value, so that the documents themselves cannot drift together with Marshal.
	if got := idempotencyToken("charge:inv_1", 1); got != goldenToken {
		t.Errorf("idempotencyToken(charge:inv_1, 1) = %s, want %s", got, goldenToken)
	}
}

// goldenToken is idempotencyToken("charge:inv_1", 1) as the map-based writer computed it.
const goldenToken = "c2696622-ccdb-8ddb-a56e-a57a784a37b2"

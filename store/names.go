package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/policy"
)

// NormalizeApprover returns the name an approver (or a resolver) is recorded as: NFKC-normalized
// and trimmed of surrounding white space. It refuses a name that is empty, not valid UTF-8, more
// than one line, or that holds a control character or a format character (bidi overrides and
// isolates, zero-width spaces and joiners, the byte-order mark): evidence names a person, and a
// name must read as what it is and must not be made to differ invisibly from another.
func NormalizeApprover(name string) (string, error) {
	if !utf8.ValidString(name) {
		return "", fmt.Errorf("approver %s is not valid UTF-8", safetext.Quote(name))
	}
	n := strings.TrimSpace(norm.NFKC.String(name))
	if n == "" {
		return "", errors.New("approver is empty")
	}
	if SameName(n, ExpiryApprover) {
		return "", fmt.Errorf("approver %s is reserved: it records a request denied at its expiry", safetext.Quote(name))
	}
	for _, r := range n {
		switch {
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			return "", fmt.Errorf("approver %s contains a control character or a line break", safetext.Quote(name))
		case unicode.Is(unicode.Cf, r):
			return "", fmt.Errorf("approver %s contains an invisible format character (%U)", safetext.Quote(name), r)
		}
	}
	return n, nil
}

// CheckApprover validates an approver name as NormalizeApprover does.
func CheckApprover(name string) error {
	_, err := NormalizeApprover(name)
	return err
}

// SameName reports whether two names name the same principal for the self-approval check: equal
// after NFKC normalization and Unicode case folding, with white space and invisible format
// characters removed. It errs towards "same": `Carol`, ` carol `, `CAROL`, `ｃａｒｏｌ` and `ca\u200brol`
// are all carol. Look-alikes from other scripts (a Cyrillic `с` for a Latin `c`) are not folded.
func SameName(a, b string) bool {
	ka, kb := nameKey(a), nameKey(b)
	return ka != "" && ka == kb
}

// nameKey is policy.NameKey: one rule for comparing names, whether they come from a policy's
// roles or from an answer.
func nameKey(s string) string { return policy.NameKey(s) }

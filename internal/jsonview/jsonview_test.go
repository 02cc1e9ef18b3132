package jsonview

import (
	"net/http"
	"testing"

	"github.com/latchkit/latch/store"
)

func TestAnswerStatus(t *testing.T) {
	t.Parallel()
	for reason, want := range map[string]int{
		store.ReasonSelfApproval:    http.StatusForbidden,
		store.ReasonNotEntitled:     http.StatusForbidden,
		store.ReasonNotVerified:     http.StatusForbidden,
		"invalid_note":              http.StatusBadRequest,
		"invalid_approver":          http.StatusBadRequest,
		store.ReasonAlreadyAnswered: http.StatusConflict,
		"already_denied":            http.StatusConflict,
		"expired":                   http.StatusConflict,
	} {
		if got := AnswerStatus(reason); got != want {
			t.Errorf("AnswerStatus(%q) = %d, want %d", reason, got, want)
		}
	}
}

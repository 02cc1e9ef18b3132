package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/latchkit/latch/canon"
)

// checkResult validates the result of a committed effect as every route that stores one does
// (an outcome, a resolution): JSON in latch's canonical value model — no floats, no integers
// beyond 2^53, no duplicate keys — since it is handed to later duplicates and its receipt is
// hashed. It returns the canonical form, or the problem naming the member (result) and the JSON
// pointer into it of the value refused. An absent or null result is none.
func checkResult(raw json.RawMessage) (json.RawMessage, *Problem) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	_, canonical, err := canon.ParseCanonical(raw)
	if err != nil {
		p := problem(http.StatusBadRequest, "invalid_field", "result: "+trimLatch(err))
		p.Field = "result"
		if ce := (*canon.Error)(nil); errors.As(err, &ce) {
			p.Pointer = ce.Pointer
		}
		return nil, p
	}
	return canonical, nil
}

package latch

import (
	"encoding/json"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
)

// receiptArguments are the arguments a receipt records of a call to action under pol: the
// canonical arguments, with the value of each argument the policy redacts replaced by a
// salted commitment to it and its masked form (receipt.Redacted). The action hash and the
// store keep the full value; the receipt, read by every surface that shows receipts, does not.
// Arguments that do not read as an object are recorded as they are (no declared argument can
// then be among them).
func receiptArguments(pol *policy.Policy, action string, args []byte) json.RawMessage {
	rs := pol.Redactions(action)
	if len(rs) == 0 || len(args) == 0 {
		return args
	}
	v, err := canon.Parse(args)
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		return args
	}
	forms, shown := map[string]string{}, map[string]string{}
	for name, r := range rs {
		if x, ok := m[name]; ok {
			forms[name], shown[name] = string(r), r.Mask(x)
		}
	}
	out, err := receipt.RedactArguments(args, forms, shown)
	if err != nil {
		// Never the value in full: the masked form alone, without a commitment.
		return pol.RedactJSON(action, args)
	}
	return out
}

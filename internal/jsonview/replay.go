package jsonview

// PolicyReplay is a policy replay's report (package internal/policyreplay): which recorded calls
// a proposed policy would decide otherwise, and how many of each change. latch policy replay
// --json prints it; a policy proposal shows it.
type PolicyReplay struct {
	PolicyHash    string  `json:"policy_hash"`
	PolicyVersion *string `json:"policy_version"`
	Replayed      int     `json:"replayed"` // call receipts re-decided
	Skipped       int     `json:"skipped"`  // call receipts without a principal
	Kept          int     `json:"kept"`     // refusals kept as recorded: a circumstance of the moment, not the policy
	FirstSeq      *int64  `json:"first_seq"`
	LastSeq       *int64  `json:"last_seq"`
	Changed       int     `json:"changed"`
	// Transitions counts the changed calls per change, keyed "allow→approve".
	Transitions map[string]int `json:"transitions"`
	// Changes lists the changed calls in seq order, capped; Truncated says some were left out
	// (the counts still cover them).
	Changes   []ReplayChange `json:"changes"`
	Truncated bool           `json:"truncated"`
}

// ReplayChange is one recorded call whose decision a proposed policy changes.
type ReplayChange struct {
	Seq         int64     `json:"seq"`
	ReceiptID   string    `json:"receipt_id"`
	ActionID    string    `json:"action_id"`
	Action      string    `json:"action"`
	Principal   Principal `json:"principal"`
	Environment string    `json:"environment"`
	Resource    *string   `json:"resource"`
	EffectKey   *string   `json:"effect_key"`
	StartedAt   *string   `json:"started_at"`
	From        string    `json:"from"`        // the recorded decision
	FromReason  *string   `json:"from_reason"` // the recorded reason
	To          string    `json:"to"`          // the proposed policy's decision
	Reason      *string   `json:"reason"`      // the proposed policy's reason
}

package jsonview

// HopTree is what ran under one hop, as `latch inspect --hop ID --json` prints it: the hop as
// stored (null when the store holds no delegation by that id, though receipts name it), its own
// records (its creation, the sender's side, and its revocation), each call decided under it,
// grouped by action, with the effect record each call's key holds now, and every receipt naming
// the hop in chain order. A hop hands nothing further on (it is never delegable), so the tree
// is one level of calls deep.
type HopTree struct {
	Hop        string      `json:"hop"`
	Delegation *Delegation `json:"delegation"`
	// State is live, revoked or expired (a hop past its expires_at), as of the reading; "" when
	// the store holds no delegation by the id.
	State    string    `json:"state"`
	Records  []Receipt `json:"records"`
	Calls    []HopCall `json:"calls"`
	Receipts []Receipt `json:"receipts"`
}

// HopCall is one call decided under a hop: its action id, what it asked, who asked, how it
// ended (its last receipt's result and reason), its effect key and that key's record now (null
// when the call reserved none), and its receipts in chain order.
type HopCall struct {
	ActionID  string    `json:"action_id"`
	Action    string    `json:"action"`
	Principal Principal `json:"principal"`
	Result    string    `json:"result"`
	Reason    *string   `json:"reason"`
	EffectKey *string   `json:"effect_key"`
	Effect    *Effect   `json:"effect"`
	Receipts  []Receipt `json:"receipts"`
}

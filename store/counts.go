package store

import "context"

// Counts is how many effect records a store holds in each state, and how many approval
// requests in each status.
type Counts struct {
	Effects   map[State]int64
	Approvals map[ApprovalStatus]int64
}

// Counter is implemented by stores that count their records by state in one read, for a
// metrics gauge; both built-in stores do. It reads no rows beyond an index or a table scan of
// two columns, and writes nothing.
type Counter interface {
	Counts(ctx context.Context) (*Counts, error)
}

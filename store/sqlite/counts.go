package sqlite

import (
	"context"
	"fmt"

	"github.com/latchkit/latch/store"
)

// Counts counts effect records by state and approval requests by status.
func (s *Store) Counts(ctx context.Context) (*store.Counts, error) {
	c := &store.Counts{Effects: map[store.State]int64{}, Approvals: map[store.ApprovalStatus]int64{}}
	if err := countBy(ctx, s, `SELECT state, count(*) FROM effects GROUP BY state`, func(k string, n int64) {
		c.Effects[store.State(k)] = n
	}); err != nil {
		return nil, fmt.Errorf("count effects: %w", err)
	}
	if err := countBy(ctx, s, `SELECT status, count(*) FROM approvals GROUP BY status`, func(k string, n int64) {
		c.Approvals[store.ApprovalStatus(k)] = n
	}); err != nil {
		return nil, fmt.Errorf("count approvals: %w", err)
	}
	return c, nil
}

func countBy(ctx context.Context, s *Store, q string, put func(string, int64)) error {
	rows, err := s.r.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return err
		}
		put(k, n)
	}
	return rows.Err()
}

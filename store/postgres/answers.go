package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// answersVersion is the schema that added approval_answers (migration 7). A reader of an older
// schema has no answers to read.
const answersVersion = 7

// answerQueries are the statements of approval_answers, {s} standing for the schema.
type answerQueries struct {
	// lockApproval reads a request for an answer, locking its row: concurrent answers to one
	// request take turns, so each counts the answers before it.
	lockApproval          string
	answersOf, allAnswers string
	insertAnswer          string
	answerPresent         string
	standing              bool // the schema has the standing column (standingVersion)
}

func newAnswerQueries(schema, approvalRead string, version int) answerQueries {
	cols := `approval_id, approver, method, verified, granted, note, answered_at, required, ''`
	insert := `INSERT INTO {s}.approval_answers (approval_id, n, approver, approver_key, method, verified, granted,
			note, answered_at, required) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`
	if version >= standingVersion {
		cols = `approval_id, approver, method, verified, granted, note, answered_at, required, standing`
		insert = `INSERT INTO {s}.approval_answers (approval_id, n, approver, approver_key, method, verified, granted,
			note, answered_at, required, standing) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`
	}
	r := strings.NewReplacer("{s}", schema).Replace
	return answerQueries{
		standing:     version >= standingVersion,
		lockApproval: r(`SELECT ` + approvalRead + ` FROM {s}.approvals WHERE approval_id = $1 FOR UPDATE`),
		answersOf:    r(`SELECT ` + cols + ` FROM {s}.approval_answers WHERE approval_id = $1 ORDER BY n`),
		allAnswers:   r(`SELECT ` + cols + ` FROM {s}.approval_answers ORDER BY approval_id, n`),
		insertAnswer: r(insert),
		answerPresent: r(`SELECT count(*) FROM {s}.approval_answers WHERE approval_id = $1 AND n = $2 AND approver_key = $3
			AND answered_at = $4`),
	}
}

// scanAnswer reads one row of the answer columns.
func scanAnswer(row pgx.Row) (string, store.Answer, error) {
	var id string
	var x store.Answer
	var at stamp
	var terms string
	if err := row.Scan(&id, &x.Name, &x.Method, &x.Verified, &x.Grant, &x.Note, &at, &x.Required, &terms); err != nil {
		return "", x, err
	}
	x.At = fromNanos(at)
	if terms != "" {
		x.Standing = new(store.StandingTerms)
		if err := json.Unmarshal([]byte(terms), x.Standing); err != nil {
			return "", x, fmt.Errorf("standing terms: %w", err)
		}
	}
	return id, x, nil
}

// withAnswers sets Answers and Required of a from its answers.
func withAnswers(a *store.Approval, answers []store.Answer) {
	a.Answers = answers
	if n := len(answers); n > 0 {
		a.Required = answers[n-1].Required
	}
}

// lockApproval reads the approval id for an answer, locking its row, nil when there is none;
// with its answers. In a re-issue it then looks for the lost attempt, as readApproval does.
func (t *txn) lockApproval(ctx context.Context, id string) (*store.Approval, error) {
	q := t.s.q.readApproval
	if t.s.q.answers.lockApproval != "" {
		q = t.s.q.answers.lockApproval
	}
	var r approvalRow
	err := r.scan(t.QueryRow(ctx, q, id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, t.checkPending(ctx)
	case err != nil:
		return nil, fmt.Errorf("read approval %s: %w", id, err)
	}
	if err := t.checkPending(ctx); err != nil {
		return nil, err
	}
	a := r.approval()
	if t.s.q.answers.answersOf == "" {
		return a, nil
	}
	rows, err := t.Query(ctx, t.s.q.answers.answersOf, id)
	if err != nil {
		return nil, fmt.Errorf("read answers of %s: %w", id, err)
	}
	answers, err := collectAnswers(rows, nil)
	if err != nil {
		return nil, fmt.Errorf("read answers of %s: %w", id, err)
	}
	withAnswers(a, answers[id])
	return a, nil
}

// collectAnswers reads answer rows into a map by request id (keep, when not nil, selects ids).
func collectAnswers(rows pgx.Rows, keep map[string]bool) (map[string][]store.Answer, error) {
	defer rows.Close()
	out := map[string][]store.Answer{}
	for rows.Next() {
		id, x, err := scanAnswer(rows)
		if err != nil {
			return nil, err
		}
		if keep == nil || keep[id] {
			out[id] = append(out[id], x)
		}
	}
	return out, rows.Err()
}

// insertAnswer records the n-th answer to request id. The unique (approval_id, approver_key)
// backs up PlanAnswer: a person answers a request once.
func (t *txn) insertAnswer(ctx context.Context, id string, n int, x *store.Answer) error {
	if t.s.q.answers.insertAnswer == "" {
		return errors.New("this schema keeps no answers: open it once with this binary's writer")
	}
	at, err := nanos(x.At)
	if err != nil {
		return fmt.Errorf("answer %d of %s: %w", n, id, err)
	}
	key := policy.NameKey(x.Name)
	args := []any{id, n, x.Name, key, x.Method, x.Verified, x.Grant, x.Note, at, x.Required}
	switch {
	case t.s.q.answers.standing:
		terms := ""
		if x.Standing != nil {
			raw, err := json.Marshal(x.Standing)
			if err != nil {
				return fmt.Errorf("answer %d of %s: %w", n, id, err)
			}
			terms = string(raw)
		}
		args = append(args, terms)
	case x.Standing != nil:
		return errNoStanding
	}
	return t.insert(ctx, fmt.Sprintf("answer %d of %s", n, id), t.s.q.answers.insertAnswer, args,
		presence{t.s.q.answers.answerPresent, []any{id, n, key, at}})
}

// readAnswers sets the answers of each request in list.
func (s *Store) readAnswers(ctx context.Context, db pgQuerier, list ...*store.Approval) error {
	if len(list) == 0 || s.q.answers.answersOf == "" {
		return nil
	}
	var rows pgx.Rows
	var err error
	if len(list) == 1 {
		rows, err = db.Query(ctx, s.q.answers.answersOf, list[0].ID)
	} else {
		rows, err = db.Query(ctx, s.q.answers.allAnswers)
	}
	if err != nil {
		return fmt.Errorf("read answers: %w", err)
	}
	keep := make(map[string]bool, len(list))
	for _, a := range list {
		keep[a.ID] = true
	}
	byID, err := collectAnswers(rows, keep)
	if err != nil {
		return fmt.Errorf("read answers: %w", err)
	}
	for _, a := range list {
		if answers := byID[a.ID]; len(answers) > 0 {
			withAnswers(a, answers)
		}
	}
	return nil
}

package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// answersVersion is the schema that added approval_answers (migration 8). A store at an older
// schema has no answers to read, and its writer (a test's store an older binary left) records
// none.
const answersVersion = 8

// answersJSON aggregates the answers of one request into a JSON array in answer order, so that
// one row (read by the writer's single-row query, or per request by a reader) carries them all.
const answersJSON = `json_group_array(json_object('approver', approver, 'method', method, 'verified', verified,
	'granted', granted, 'note', note, 'at', answered_at, 'required', required, 'standing', standing))`

// answersJSONOld is answersJSON for a schema before standingVersion, which has no standing column.
const answersJSONOld = `json_group_array(json_object('approver', approver, 'method', method, 'verified', verified,
	'granted', granted, 'note', note, 'at', answered_at, 'required', required))`

// answerDoc is one element of answersJSON.
type answerDoc struct {
	Approver string `json:"approver"`
	Method   string `json:"method"`
	Verified int    `json:"verified"`
	Granted  int    `json:"granted"`
	Note     string `json:"note"`
	At       int64  `json:"at"`
	Required int    `json:"required"`
	Standing string `json:"standing"` // the terms' JSON; "" for a plain grant
}

// decodeAnswers reads answersJSON.
func decodeAnswers(text string) ([]store.Answer, error) {
	var docs []answerDoc
	if err := json.Unmarshal([]byte(text), &docs); err != nil {
		return nil, fmt.Errorf("read answers: %w", err)
	}
	out := make([]store.Answer, 0, len(docs))
	for _, d := range docs {
		x := store.Answer{Approver: store.Approver{Name: d.Approver, Method: d.Method, Verified: d.Verified == 1},
			Grant: d.Granted == 1, Note: d.Note, At: time.Unix(0, d.At).UTC(), Required: d.Required}
		if d.Standing != "" {
			x.Standing = new(store.StandingTerms)
			if err := json.Unmarshal([]byte(d.Standing), x.Standing); err != nil {
				return nil, fmt.Errorf("read answers: standing terms: %w", err)
			}
		}
		out = append(out, x)
	}
	return out, nil
}

// withAnswers sets Answers and Required of a from its answers.
func withAnswers(a *store.Approval, answers []store.Answer) {
	a.Answers = answers
	if n := len(answers); n > 0 {
		a.Required = answers[n-1].Required
	}
}

// answers reads the answers to request id in the transaction, oldest first.
func (t *txn) answers(id string) ([]store.Answer, error) {
	if t.noAnswers {
		return nil, nil
	}
	var text string
	_, err := t.c.queryRow(`SELECT `+t.answersJSON()+` FROM (SELECT * FROM approval_answers WHERE approval_id = ? ORDER BY n)`,
		[]any{id}, func(sc scanner) error { return sc.Scan(&text) })
	if err != nil {
		return nil, fmt.Errorf("answers of %s: %w", id, err)
	}
	return decodeAnswers(text)
}

// insertAnswer records the n-th answer to request id. The unique (approval_id, approver_key)
// backs up PlanAnswer: a person answers a request once.
func (t *txn) insertAnswer(id string, n int, x *store.Answer) error {
	if t.noAnswers {
		if x.Required > 1 {
			return errors.New("this store's schema keeps no answers, so it cannot count several: open it once with this binary's writer")
		}
		return nil
	}
	var b binder
	at := b.time(x.At)
	if b.err != nil {
		return b.err
	}
	if !t.hasStanding() {
		if x.Standing != nil {
			return errNoStanding
		}
		_, err := t.c.exec(`INSERT INTO approval_answers (approval_id, n, approver, approver_key, method, verified, granted, note,
		answered_at, required) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, n, x.Name, policy.NameKey(x.Name), x.Method, boolInt(x.Verified), boolInt(x.Grant), x.Note, at, x.Required)
		if err != nil {
			return fmt.Errorf("answer %d of %s: %w", n, id, err)
		}
		return nil
	}
	terms := ""
	if x.Standing != nil {
		raw, err := json.Marshal(x.Standing)
		if err != nil {
			return fmt.Errorf("answer %d of %s: %w", n, id, err)
		}
		terms = string(raw)
	}
	_, err := t.c.exec(`INSERT INTO approval_answers (approval_id, n, approver, approver_key, method, verified, granted, note,
		answered_at, required, standing) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, n, x.Name, policy.NameKey(x.Name), x.Method, boolInt(x.Verified), boolInt(x.Grant), x.Note, at, x.Required, terms)
	if err != nil {
		return fmt.Errorf("answer %d of %s: %w", n, id, err)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// readAnswers sets the answers of each request in list, read in one query of tx.
func (s *Store) readAnswers(ctx context.Context, tx *sql.Tx, list ...*store.Approval) error {
	if len(list) == 0 || s.version != 0 && s.version < answersVersion {
		return nil
	}
	byID := make(map[string]*store.Approval, len(list))
	for _, a := range list {
		byID[a.ID] = a
	}
	aj := answersJSON
	if s.version != 0 && s.version < standingVersion {
		aj = answersJSONOld
	}
	q := `SELECT approval_id, ` + aj + ` FROM (SELECT * FROM approval_answers ORDER BY approval_id, n) GROUP BY approval_id`
	var args []any
	if len(list) == 1 {
		q = `SELECT approval_id, ` + aj + ` FROM (SELECT * FROM approval_answers WHERE approval_id = ? ORDER BY n) GROUP BY approval_id`
		args = []any{list[0].ID}
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("read answers: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var text sql.NullString
		if err := rows.Scan(&id, &text); err != nil {
			return fmt.Errorf("read answers: %w", err)
		}
		a := byID[id]
		if a == nil || !text.Valid {
			continue
		}
		answers, err := decodeAnswers(text.String)
		if err != nil {
			return err
		}
		withAnswers(a, answers)
	}
	return rows.Err()
}

// answersJSON is the answers aggregate the transaction's schema can read.
func (t *txn) answersJSON() string {
	if t.hasStanding() {
		return answersJSON
	}
	return answersJSONOld
}

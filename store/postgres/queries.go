package postgres

import "strings"

// Column lists, in the order the scanners read them.
const (
	effectColumns   = `effect_key, state, attempt, action_id, action, action_hash, lease_expires_at, result, error, resolved_by, created_at, updated_at, arguments, note, conflict`
	approvalColumns = `approval_id, status, action_hash, action, action_name, agent, principal_user, policy_hash, created_at, expires_at, approver, answered_at, consumed_by, consumed_at, note, previous_denied, previous_denied_by, precondition_hash, precondition_at`
	// The list of a schema before preconditionVersion, and stand-ins for the columns it lacks.
	approvalColumnsBeforePrecondition = `approval_id, status, action_hash, action, action_name, agent, principal_user, policy_hash, created_at, expires_at, approver, answered_at, consumed_by, consumed_at, note, previous_denied, previous_denied_by`
	preconditionStandIns              = `, ''::text, NULL::bigint`
	// The list of a schema before deniedVersion, and stand-ins for the columns it lacks.
	approvalColumnsBeforeDenied = `approval_id, status, action_hash, action, action_name, agent, principal_user, policy_hash, created_at, expires_at, approver, answered_at, consumed_by, consumed_at, note`
	deniedStandIns              = `, ''::text, ''::text`
	// The lists of a schema before notesVersion: the columns it has, and stand-ins for the
	// others (a reader of an older schema; tests that build the stores older binaries left).
	effectColumnsBeforeNotes   = `effect_key, state, attempt, action_id, action, action_hash, lease_expires_at, result, error, resolved_by, created_at, updated_at`
	approvalColumnsBeforeNotes = `approval_id, status, action_hash, action, action_name, agent, principal_user, policy_hash, created_at, expires_at, approver, answered_at, consumed_by, consumed_at`
	effectStandIns             = `, NULL::bytea, ''::text, ''::text`
	approvalStandIns           = `, ''::text`
	receiptColumns             = `seq, hash, doc`
	eventColumns               = `id, kind, at, action_id, effect_key, approval_id, payload`
	// delegationSelect reads delegations with their revocation, if any.
	// {via} is d.via, d.reason, or stand-ins for them before viaVersion.
	delegationSelect = `SELECT d.delegation_id, d.parent, d.grant_doc, d.created_by, d.created_at, r.revoked_at,
		COALESCE(r.revoked_by, ''), {via} FROM {s}.delegations d LEFT JOIN {s}.revocations r ON r.delegation_id = d.delegation_id`
)

// queries holds every statement the store runs, its tables qualified with the quoted schema.
// They are built once at Open; {s} in the templates below is the schema.
type queries struct {
	readEffect, insertEffect, casEffect                     string
	readApproval, insertApproval, casApproval               string
	pendingByHash, answeredByHash                           string
	approvalInsertColumns                                   int // how many columns insertApproval sets
	insertEvent, insertEventWithID, bumpHead, insertReceipt string
	insertEvents                                            string
	readEffects, readApprovals, appendReceipts, lockHead    string
	lockHeadBatch                                           string
	recorded                                                string
	validTokens                                             string
	witness, head, listApprovals                            string
	listApprovalsOfHash                                     string
	listEvents, listEventsAfter, approvalPresent            string
	lastEventID                                             string
	readDelegation, listDelegations, insertDelegation       string
	delegationPresent, insertRevocation, revocationPresent  string
	receipts                                                string        // the qualified table, for filtered queries
	legacy                                                  bool          // the schema is older than notesVersion
	answers                                                 answerQueries // zero before answersVersion
	effectRead, approvalRead                                string        // the column lists the scanners read, at this schema
	// The batch's forms of the statements a batch checks (mustOne), and the read-back of the
	// ids of a batch's events whose reply was lost.
	mustInsertEffect, mustCASEffect, mustCASApproval string
	eventIDs, eventPresent                           string
}

// notesVersion is the schema that added effects.arguments, note and conflict and approvals.note
// (migration 5).
const notesVersion = 5

// deniedVersion is the schema that added approvals.previous_denied and previous_denied_by
// (migration 6).
const deniedVersion = 6

// preconditionVersion is the schema that added approvals.precondition_hash and precondition_at
// (migration 16).
const preconditionVersion = 16

// newQueries builds the statements for the quoted schema at the given schema version.
func newQueries(schema string, version int) queries {
	r := strings.NewReplacer("{s}", schema)
	// effectRead and approvalRead select the columns of the scanners; effectWrite and
	// approvalWrite are the columns a write sets, in the order of the rows' args.
	effectRead, effectWrite, approvalRead, approvalWrite := effectColumns, effectColumns, approvalColumns, approvalColumns
	effectCAS, approvalCAS := `, arguments = $17, note = $18, conflict = $19`, `, note = $16`
	effectValues, approvalValues := `, $13, $14, $15`, `, $15`
	approvalValues += `, $16, $17, $18, $19`
	insertColumns := 19
	via := `d.via, d.reason`
	if version < viaVersion {
		via = `''::text, ''::text` // every row of such a schema is a delegation
	}
	switch {
	case version < notesVersion:
		effectRead, effectWrite = effectColumnsBeforeNotes+effectStandIns, effectColumnsBeforeNotes
		approvalRead, approvalWrite = approvalColumnsBeforeNotes+approvalStandIns+deniedStandIns+preconditionStandIns, approvalColumnsBeforeNotes
		effectCAS, approvalCAS, effectValues, approvalValues = "", "", "", ""
		insertColumns = 14
	case version < deniedVersion:
		approvalRead, approvalWrite = approvalColumnsBeforeDenied+deniedStandIns+preconditionStandIns, approvalColumnsBeforeDenied
		approvalValues = `, $15`
		insertColumns = 15
	case version < preconditionVersion:
		// A request stored in such a schema keeps no fingerprint: presented, it is one that
		// captured none.
		approvalRead, approvalWrite = approvalColumnsBeforePrecondition+preconditionStandIns, approvalColumnsBeforePrecondition
		approvalValues = `, $15, $16, $17`
		insertColumns = 17
	}
	effectInsert := `INSERT INTO {s}.effects (` + effectWrite + `)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12` + effectValues + `)`
	var answers answerQueries
	if version >= answersVersion {
		answers = newAnswerQueries(schema, approvalRead, version)
	}
	q := queries{
		answers:               answers,
		effectRead:            effectRead,
		approvalRead:          approvalRead,
		legacy:                version < notesVersion,
		approvalInsertColumns: insertColumns,
		// The requests of one action hash (ApprovalRequest): those pending, the last answered.
		pendingByHash: r.Replace(`SELECT ` + approvalRead + ` FROM {s}.approvals WHERE action_hash = $1 AND status = 'pending'`),
		answeredByHash: r.Replace(`SELECT ` + approvalRead + ` FROM {s}.approvals
			WHERE action_hash = $1 AND status IN ('granted', 'denied', 'consumed') ORDER BY created_at DESC, approval_id DESC LIMIT 1`),
		readEffect:   r.Replace(`SELECT ` + effectRead + ` FROM {s}.effects WHERE effect_key = $1`),
		insertEffect: r.Replace(effectInsert + ` ON CONFLICT (effect_key) DO NOTHING`),
		// A batch's insert of an effect: a row there already is a unique_violation, which aborts
		// the batch's transaction as mustOne's error does. ON CONFLICT would make it a speculative
		// insertion: a probe of the primary key before the row is written and one more WAL record
		// to confirm it, for a conflict that is rare (the batch read the key's row after locking
		// the chain head) and that must fail the batch's transaction either way.
		mustInsertEffect: r.Replace(effectInsert),
		// The compare-and-set of docs/guarantees.md#atomicity: the row must still be exactly the holder, state,
		// attempt and lease that the decider saw. The lease is compared too, so a lapse decided
		// from an old lease cannot overwrite a lease the holder has just extended.
		casEffect: r.Replace(`UPDATE {s}.effects SET state = $6, attempt = $7, action_id = $8, action = $9,
			action_hash = $10, lease_expires_at = $11, result = $12, error = $13, resolved_by = $14, created_at = $15,
			updated_at = $16` + effectCAS + `
			WHERE effect_key = $1 AND state = $2 AND attempt = $3 AND action_id = $4
				AND lease_expires_at IS NOT DISTINCT FROM $5`),
		readApproval: r.Replace(`SELECT ` + approvalRead + ` FROM {s}.approvals WHERE approval_id = $1`),
		insertApproval: r.Replace(`INSERT INTO {s}.approvals (` + approvalWrite + `)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14` + approvalValues + `) ON CONFLICT (approval_id) DO NOTHING`),
		casApproval: r.Replace(`UPDATE {s}.approvals SET status = $3, action_hash = $4, action = $5, action_name = $6,
			agent = $7, principal_user = $8, policy_hash = $9, created_at = $10, expires_at = $11, approver = $12,
			answered_at = $13, consumed_by = $14, consumed_at = $15` + approvalCAS + `
			WHERE approval_id = $1 AND status = $2`),
		insertEvent: r.Replace(`INSERT INTO {s}.events (kind, at, action_id, effect_key, approval_id, payload)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`),
		// Re-issuing a transaction whose commit was lost reuses its event ids: the primary key
		// then waits for that transaction if it is still finishing, and finds its rows if it landed.
		insertEventWithID: r.Replace(`INSERT INTO {s}.events (id, kind, at, action_id, effect_key, approval_id, payload)
			VALUES ($7, $1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING RETURNING id`),
		// The head row serializes appenders for the rest of their (short) transaction: seq is
		// taken here, and only a commit makes it visible, so a rolled-back append leaves no gap.
		bumpHead: r.Replace(`UPDATE {s}.chain_head SET seq = seq + 1 WHERE id = 1 RETURNING seq, hash`),
		insertReceipt: r.Replace(`WITH r AS (
				INSERT INTO {s}.receipts (seq, hash, doc, receipt_id, action_id, action, effect_key, approval_id, result, finished_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING seq)
			UPDATE {s}.chain_head SET hash = $2 WHERE id = 1 AND seq = (SELECT seq FROM r)`),
		readEffects:   r.Replace(`SELECT ` + effectRead + ` FROM {s}.effects WHERE effect_key = ANY($1)`),
		readApprovals: r.Replace(`SELECT ` + approvalRead + ` FROM {s}.approvals WHERE approval_id = ANY($1)`),
		// The action ids among $1 that have a receipt (RecordRequest.Once).
		recorded: r.Replace(`SELECT DISTINCT action_id FROM {s}.receipts WHERE action_id = ANY($1)`),
		// The hashes among $1 of valid tokens (store.TokenCheck), read in a write's transaction.
		validTokens: r.Replace(`SELECT hash FROM {s}.tokens WHERE hash = ANY($1) AND revoked_at IS NULL`),
		// A batch's events, column by column, inserted (and so numbered) in array order.
		insertEvents: r.Replace(`INSERT INTO {s}.events (kind, at, action_id, effect_key, approval_id, payload)
			SELECT kind, at, action_id, effect_key, approval_id, payload
			FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::bytea[])
				WITH ORDINALITY AS e (kind, at, action_id, effect_key, approval_id, payload, n)
			ORDER BY n RETURNING id`),
		// Every planned write (batch.go) locks the head first, before any effect or approval row:
		// the lock order of the package documentation.
		lockHead: r.Replace(`SELECT seq, hash FROM {s}.chain_head WHERE id = 1 FOR UPDATE`),
		// The batch's lock of the head sets its transaction's settings too (batch.go, beginBatch):
		// the idle timeout begin sets, generic plans, and no sequential scans. They apply from the
		// next statement on, and every read of a batch comes after this one.
		lockHeadBatch: r.Replace(`SELECT seq, hash, set_config('idle_in_transaction_session_timeout', '30s', true),
			set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)
			FROM {s}.chain_head WHERE id = 1 FOR UPDATE`),
		witness: r.Replace(`SELECT (SELECT hash FROM {s}.receipts WHERE seq = $1),
			(SELECT count(*) FROM {s}.events WHERE id = ANY($2))`),
		head:          r.Replace(`SELECT seq, hash FROM {s}.chain_head WHERE id = 1`),
		listApprovals: r.Replace(`SELECT ` + approvalRead + ` FROM {s}.approvals WHERE ($1 = '' OR status = $1) ORDER BY created_at, approval_id`),
		// Its own statement, so that even a generic plan reads approvals_action_hash.
		listApprovalsOfHash: r.Replace(`SELECT ` + approvalRead + ` FROM {s}.approvals WHERE ($1 = '' OR status = $1) AND action_hash = $2
			ORDER BY created_at, approval_id`),
		lastEventID: r.Replace(`SELECT COALESCE(MAX(id), 0) FROM {s}.events`),
		listEvents: r.Replace(`SELECT ` + eventColumns + ` FROM {s}.events
			WHERE ($1 = '' AND $2 = '' AND $3 = '')
				OR ($1 <> '' AND action_id = $1) OR ($2 <> '' AND effect_key = $2) OR ($3 <> '' AND approval_id = $3 AND approval_id <> '')
			ORDER BY id`),
		// A page of the log after an id (LIMIT NULL is no limit).
		listEventsAfter: r.Replace(`SELECT ` + eventColumns + ` FROM {s}.events
			WHERE (($1 = '' AND $2 = '' AND $3 = '')
				OR ($1 <> '' AND action_id = $1) OR ($2 <> '' AND effect_key = $2) OR ($3 <> '' AND approval_id = $3 AND approval_id <> ''))
				AND id > $4
			ORDER BY id LIMIT $5`),
		receipts: r.Replace(`{s}.receipts`),
		// The columns of an approval request that never change after it is created.
		approvalPresent: r.Replace(`SELECT count(*) FROM {s}.approvals
			WHERE approval_id = $1 AND action_hash = $2 AND created_at IS NOT DISTINCT FROM $3`),
		readDelegation:  r.Replace(strings.Replace(delegationSelect, "{via}", via, 1) + ` WHERE d.delegation_id = $1`),
		listDelegations: r.Replace(strings.Replace(delegationSelect, "{via}", via, 1) + ` ORDER BY d.seq`),
		insertDelegation: r.Replace(`INSERT INTO {s}.delegations (delegation_id, parent, grant_doc, created_by, created_at, via, reason)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (delegation_id) DO NOTHING`),
		delegationPresent: r.Replace(`SELECT count(*) FROM {s}.delegations
			WHERE delegation_id = $1 AND parent = $2 AND grant_doc = $3 AND created_by = $4 AND created_at = $5
				AND via = $6 AND reason = $7`),
		insertRevocation: r.Replace(`INSERT INTO {s}.revocations (delegation_id, revoked_by, revoked_at)
			VALUES ($1, $2, $3) ON CONFLICT (delegation_id) DO NOTHING`),
		revocationPresent: r.Replace(`SELECT count(*) FROM {s}.revocations
			WHERE delegation_id = $1 AND revoked_by = $2 AND revoked_at = $3`),
		// A batch's receipts, column by column, and the head moved to the last of them: one row
		// updated proves that every receipt was stored and that the head was where the batch
		// found it ($13); none is an error (mustOne).
		appendReceipts: r.Replace(`WITH r AS (
				INSERT INTO {s}.receipts (seq, hash, doc, receipt_id, action_id, action, effect_key, approval_id, result, finished_at)
				SELECT * FROM unnest($1::bigint[], $2::text[], $3::bytea[], $4::text[], $5::text[], $6::text[], $7::text[],
					$8::text[], $9::text[], $10::bigint[])
				RETURNING seq),
			h AS (UPDATE {s}.chain_head SET seq = $11, hash = $12
				WHERE id = 1 AND seq = $13 AND (SELECT count(*) FROM r) = $14 RETURNING 1)
			SELECT 1 / count(*)::int FROM h`),
		// The ids of events given whole, in the order given, each matched on every column but its
		// id: the events of a batch that committed while its reply was lost (batch.go). An event
		// carries its call's action id and the time of its request to the nanosecond, so no other
		// write has written one equal to it.
		eventIDs: r.Replace(`SELECT e.n, v.id
			FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::bytea[])
				WITH ORDINALITY AS e (kind, at, action_id, effect_key, approval_id, payload, n)
			JOIN {s}.events v ON v.action_id = e.action_id AND v.kind = e.kind AND v.at = e.at
				AND v.effect_key = e.effect_key AND v.approval_id = e.approval_id
				AND v.payload IS NOT DISTINCT FROM e.payload
			ORDER BY e.n, v.id`),
	}
	q.eventPresent = r.Replace(`SELECT count(*) FROM {s}.events WHERE action_id = $3 AND kind = $1 AND at = $2
		AND effect_key = $4 AND approval_id = $5 AND payload IS NOT DISTINCT FROM $6`)
	q.mustCASEffect, q.mustCASApproval = mustOne(q.casEffect), mustOne(q.casApproval)
	return q
}

// mustOne wraps a statement that must change exactly one row (a compare-and-set) into one that
// fails when it changes none: 1 / 0 is a division_by_zero error. A batch sends its COMMIT behind
// its writes without waiting for their replies (batch.go), so a write that finds its row changed
// must abort the transaction on the server, not merely report no row to the client.
func mustOne(stmt string) string {
	return `WITH w AS (` + stmt + ` RETURNING 1) SELECT 1 / count(*)::int FROM w`
}

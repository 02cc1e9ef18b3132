-- latch schema 19: answers given through Slack's buttons are recorded with their own method,
-- slack (docs/approvals.md#verified-answers), where they were recorded as proxy before: Slack
-- signs each request and the interactivity endpoint maps the Slack user to an approver, which is
-- not the trusted header of an authenticating proxy.
--
-- The method's check is replaced by a wider one; answers recorded as proxy before stay proxy.
-- Dropping and adding the constraint in one transaction validates the existing rows once, under
-- the table's lock, as every other migration runs.

ALTER TABLE {schema}.approval_answers DROP CONSTRAINT approval_answers_method_check;
ALTER TABLE {schema}.approval_answers ADD CONSTRAINT approval_answers_method_check
	CHECK (method IN ('cli', 'token', 'jwt', 'session', 'proxy', 'slack'));

-- latch schema 11: a placeholder in the console branch, kept only so that schema 12 follows
-- without a gap; the begin branch's 0011_request_keys.sql replaces it when both are merged.
SELECT 1;

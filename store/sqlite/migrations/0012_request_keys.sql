-- latch schema 12: a placeholder in the console branch, kept only so that schema 13 follows
-- without a gap; the begin branch's 0012_request_keys.sql replaces it when both are merged.
SELECT 1;

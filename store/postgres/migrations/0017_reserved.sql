-- latch schema 17: reserved. This version changes nothing; it keeps the numbering without gaps.
SELECT 1;

-- latch schema 18: reserved. This version changes nothing; it keeps the numbering without gaps.
SELECT 1;

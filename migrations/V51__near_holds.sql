-- A new whole-host lease reads only the hosts near its window
-- (queries::near): the free hosts whose holds end nearest before it and
-- start nearest after it, whatever the host, each list a scan of one of
-- these indexes in best fit's order and stopped after a few rows. Bounded
-- holds only: open-ended ones (Placement's claims) never end, and start
-- before any window a new lease is placed in.
CREATE INDEX allocations_bounded_end ON allocations (upper(during)) WHERE upper(during) IS NOT NULL;
CREATE INDEX allocations_bounded_start ON allocations (lower(during)) WHERE upper(during) IS NOT NULL;

-- The manager's writes per fired event, made cheaper.
--
-- Recording an outcome changes its lease's and reservations' status, which
-- no index holds: the update can be HOT (no index entry at all, against the
-- five of leases and two of reservations) when the row's page has room for
-- the new version. Pages filled to the brim at creation had none, so every
-- status change wrote every index. Leave room on each page.
ALTER TABLE leases SET (fillfactor = 80);
ALTER TABLE reservations SET (fillfactor = 80);

-- Each claim wrote five index entries for its row (a claim changes
-- `status`, which the partial indexes' predicates read, so it is never
-- HOT). This one served no query of Berth's: the claim scans
-- lease_events_next and lease_events_claims, listings lease_events_time.
DROP INDEX lease_events_due;

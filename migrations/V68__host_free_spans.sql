-- Each host's free spans: the stretches of time no allocation of any class
-- holds it, each a point (from, until) in seconds since the epoch. Best fit
-- (berth_core::schedule) ranks a host free over a window by its gap: from
-- the end of the hold before the window (as late as any, of any class) to
-- the start of the one after. That gap is the free span holding the window,
-- so the hosts tightest around a window are the spans nearest its point
-- (start, end) among those holding it: a walk of one GiST index in order of
-- distance (queries::spans), whatever the cloud's size. The Euclidean
-- distance never exceeds the gap, so a host not walked is no tighter than
-- the last span walked.
--
-- Kept by the database, not by each command's projection, so that no path
-- that writes allocations (Placement's claims, leases, heals, replays, an
-- older release during an upgrade) can leave it behind: a command marks the
-- hosts whose allocations it changed (`host_free_spans_due`), and at commit
-- their spans are worked out again from what is committed, under locks
-- taken after every other lock the command takes.
CREATE TABLE host_free_spans (
    -- No reference to hosts: a reference's check costs more than the span's
    -- write; a host that leaves marks its spans due, as a hold does.
    provider_uuid uuid        NOT NULL,
    -- NULL: free since ever, or for ever.
    free_from     timestamptz,
    free_until    timestamptz,
    -- (free_from, free_until) in seconds since the epoch; none is -1e15 or
    -- 1e15 (some 30 million years), past any time a range holds.
    spot          point       NOT NULL
);
CREATE INDEX host_free_spans_spot ON host_free_spans USING gist (spot);
CREATE INDEX host_free_spans_host ON host_free_spans (provider_uuid);

-- The hosts whose spans are due at the commit of the transaction that
-- marked them. Rows live only within that transaction: no need to log them.
CREATE UNLOGGED TABLE host_free_spans_due (
    xact          xid8 NOT NULL DEFAULT pg_current_xact_id(),
    provider_uuid uuid NOT NULL,
    PRIMARY KEY (xact, provider_uuid)
);

-- Works out the free spans of the hosts among `ids` again from the
-- allocations committed and this transaction's own; only the spans that
-- changed are written (a lease made splits one span in two).
CREATE FUNCTION berth_free_spans_of(ids uuid[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH fresh AS MATERIALIZED (
        SELECT h.provider_uuid, lower(f) AS free_from, upper(f) AS free_until
        FROM hosts h
        CROSS JOIN LATERAL (SELECT coalesce(range_agg(a.during), '{}'::tstzmultirange) AS held
                            FROM allocations a WHERE a.provider_uuid = h.provider_uuid) x
        CROSS JOIN LATERAL unnest('{(,)}'::tstzmultirange - x.held) AS f
        WHERE h.provider_uuid = ANY(ids)
    ), kept AS MATERIALIZED (
        SELECT provider_uuid, free_from, free_until FROM host_free_spans WHERE provider_uuid = ANY(ids)
    ), gone AS (
        DELETE FROM host_free_spans s
        USING (SELECT * FROM kept EXCEPT SELECT * FROM fresh) g
        WHERE s.provider_uuid = ANY(ids) AND s.provider_uuid = g.provider_uuid
          AND s.free_from IS NOT DISTINCT FROM g.free_from AND s.free_until IS NOT DISTINCT FROM g.free_until
    )
    INSERT INTO host_free_spans (provider_uuid, free_from, free_until, spot)
    SELECT n.provider_uuid, n.free_from, n.free_until,
           point(CASE WHEN n.free_from IS NULL OR NOT isfinite(n.free_from) THEN -1e15
                      ELSE extract(epoch FROM n.free_from)::float8 END,
                 CASE WHEN n.free_until IS NULL OR NOT isfinite(n.free_until) THEN 1e15
                      ELSE extract(epoch FROM n.free_until)::float8 END)
    FROM (SELECT * FROM fresh EXCEPT SELECT * FROM kept) n;
END $$;

-- At commit: the spans of every host this transaction marked, worked out
-- under a lock, so that each is worked out from what the last commit on
-- the host left. A few hosts are locked each (sorted, after every other
-- lock the command takes, so two commits never wait on each other in a
-- cycle), under a shared lock on all; more than a few, all at once (a
-- lock per host would fill the server's lock table on a bulk write). The
-- first firing does the work of all; the later ones find nothing due.
CREATE FUNCTION berth_free_spans_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    due uuid[];
BEGIN
    WITH gone AS (DELETE FROM host_free_spans_due WHERE xact = pg_current_xact_id() RETURNING provider_uuid)
    SELECT array_agg(provider_uuid ORDER BY provider_uuid) INTO due FROM gone;
    IF due IS NULL THEN
        RETURN NULL;
    END IF;
    -- "spns" for all hosts at once; one more for each.
    IF cardinality(due) <= 64 THEN
        PERFORM pg_advisory_xact_lock_shared(1936748147, 0);
        PERFORM pg_advisory_xact_lock(1936748148, hashtext(u::text)) FROM unnest(due) AS u;
    ELSE
        PERFORM pg_advisory_xact_lock(1936748147, 0);
    END IF;
    PERFORM berth_free_spans_of(due);
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER host_free_spans_at_commit AFTER INSERT ON host_free_spans_due
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION berth_free_spans_at_commit();

-- Marks the hosts whose allocations a statement changed, or that it
-- enrolled or removed.
CREATE FUNCTION berth_free_spans_mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO host_free_spans_due (provider_uuid)
        SELECT DISTINCT n.provider_uuid FROM changed_new n
        WHERE EXISTS (SELECT 1 FROM hosts h WHERE h.provider_uuid = n.provider_uuid)
        ON CONFLICT DO NOTHING;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        INSERT INTO host_free_spans_due (provider_uuid)
        SELECT DISTINCT o.provider_uuid FROM changed_old o
        WHERE TG_TABLE_NAME = 'hosts' OR EXISTS (SELECT 1 FROM hosts h WHERE h.provider_uuid = o.provider_uuid)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER host_free_spans_inserted AFTER INSERT ON allocations
    REFERENCING NEW TABLE AS changed_new FOR EACH STATEMENT EXECUTE FUNCTION berth_free_spans_mark();
CREATE TRIGGER host_free_spans_updated AFTER UPDATE ON allocations
    REFERENCING OLD TABLE AS changed_old NEW TABLE AS changed_new
    FOR EACH STATEMENT EXECUTE FUNCTION berth_free_spans_mark();
CREATE TRIGGER host_free_spans_deleted AFTER DELETE ON allocations
    REFERENCING OLD TABLE AS changed_old FOR EACH STATEMENT EXECUTE FUNCTION berth_free_spans_mark();
-- A host enrolled: its spans from the allocations its provider has; one
-- that leaves: none.
CREATE TRIGGER host_free_spans_enrolled AFTER INSERT ON hosts
    REFERENCING NEW TABLE AS changed_new FOR EACH STATEMENT EXECUTE FUNCTION berth_free_spans_mark();
CREATE TRIGGER host_free_spans_left AFTER DELETE ON hosts
    REFERENCING OLD TABLE AS changed_old FOR EACH STATEMENT EXECUTE FUNCTION berth_free_spans_mark();

SELECT berth_free_spans_of(array_agg(provider_uuid)) FROM hosts;

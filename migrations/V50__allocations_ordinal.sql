-- Each allocation's place in the list its consumer's replacement gave, so
-- that Placement answers a consumer's allocations in the order they were
-- asked for (providers by their first allocation, classes in it), as
-- Placement does. The log carries that list in order, so replay derives
-- the column from the events.
ALTER TABLE allocations ADD COLUMN ordinal int4;

-- The rows there already: their place in their consumer's last replacement
-- in the log (equal allocations of one consumer pair up in turn).
CREATE TEMPORARY TABLE allocations_listed AS
    WITH last AS (
             SELECT DISTINCT ON (data->>'consumer') (data->>'consumer')::uuid AS consumer,
                    data->'allocations' AS listed
             FROM log_events WHERE type = 'AllocationsReplaced'
             ORDER BY data->>'consumer', position DESC)
    SELECT l.consumer, (x.a->>'provider')::uuid AS provider, x.a->>'resource_class' AS rc,
           (x.a->>'used')::int8 AS used,
           tstzrange((x.a->'window'->>'start')::timestamptz, (x.a->'window'->>'end')::timestamptz, '[)') AS during,
           (x.n - 1)::int4 AS ordinal
    FROM last l CROSS JOIN LATERAL jsonb_array_elements(l.listed) WITH ORDINALITY AS x(a, n);

WITH listed AS (
         SELECT *, row_number() OVER (PARTITION BY consumer, provider, rc, used, during ORDER BY ordinal) AS k
         FROM allocations_listed),
     held AS (
         SELECT ctid AS row, consumer_uuid, provider_uuid, resource_class, used, during,
                row_number() OVER (PARTITION BY consumer_uuid, provider_uuid, resource_class, used, during
                                   ORDER BY ctid) AS k
         FROM allocations)
UPDATE allocations a SET ordinal = l.ordinal
FROM held h JOIN listed l ON l.consumer = h.consumer_uuid AND l.provider = h.provider_uuid AND l.rc = h.resource_class
                         AND l.used = h.used AND l.during = h.during AND l.k = h.k
WHERE a.ctid = h.row;

-- A class renamed since: the listed allocations not taken, in turn.
WITH listed AS (
         SELECT l.*, row_number() OVER (PARTITION BY l.consumer, l.provider, l.used, l.during ORDER BY l.ordinal) AS k
         FROM allocations_listed l
         WHERE NOT EXISTS (SELECT 1 FROM allocations a
                           WHERE a.consumer_uuid = l.consumer AND a.ordinal = l.ordinal)),
     held AS (
         SELECT ctid AS row, consumer_uuid, provider_uuid, used, during,
                row_number() OVER (PARTITION BY consumer_uuid, provider_uuid, used, during ORDER BY ctid) AS k
         FROM allocations WHERE ordinal IS NULL)
UPDATE allocations a SET ordinal = l.ordinal
FROM held h JOIN listed l ON l.consumer = h.consumer_uuid AND l.provider = h.provider_uuid
                         AND l.used = h.used AND l.during = h.during AND l.k = h.k
WHERE a.ctid = h.row;

-- A row the log does not account for (none should be): first.
UPDATE allocations SET ordinal = 0 WHERE ordinal IS NULL;
ALTER TABLE allocations ALTER COLUMN ordinal SET NOT NULL;
DROP TABLE allocations_listed;

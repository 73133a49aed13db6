-- Allocations are a projection written by one statement of the projection
-- code, in commands that have already locked the provider and the consumer
-- and checked the class. Their foreign keys re-checked that on every row
-- written (a quarter of a claim's write), so they go; `berthd replay
-- --verify` checks instead that no allocation names a provider, consumer or
-- class that does not exist (replay's scratch tables never had them).
ALTER TABLE allocations DROP CONSTRAINT allocations_consumer_uuid_fkey;
ALTER TABLE allocations DROP CONSTRAINT allocations_provider_uuid_fkey;
ALTER TABLE allocations DROP CONSTRAINT allocations_resource_class_fkey;

-- The nearest hold ending before a window only ever concerns holds that end:
-- open-ended ones (every Placement claim) need not be in that index.
-- `upper(during) <= $x` implies the predicate, so the same queries use it.
DROP INDEX allocations_provider_upper;
CREATE INDEX allocations_provider_upper ON allocations (provider_uuid, upper(during))
    WHERE upper(during) IS NOT NULL;

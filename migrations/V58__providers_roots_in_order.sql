-- Allocation candidates with a small limit read trees a page at a time in
-- the order the search tries them (queries::candidates::world): roots by
-- creation, then UUID. A scan of this index in that order, stopped after a
-- page, reads a page's worth of roots however many providers there are.
CREATE INDEX providers_roots_in_order ON providers (created_at, uuid) WHERE parent_uuid IS NULL;

-- The project's open-ended sums split into stripes: every claim of a project
-- and user added to the same row per class, so two claim transactions of
-- one project (without a limit, where no quota guard orders them anyway)
-- waited on that row. Each claim lane now adds to its own stripe; the sum
-- is the total over the stripes, read that way by the quota check and
-- rebuilt and compared that way by replay. Writers outside the lanes use
-- stripe 0. A stripe alone means nothing (a hold added in one stripe may be
-- taken back in another) and may go below zero; only the total is kept
-- equal to the open-ended allocations.
ALTER TABLE project_open_usage ADD COLUMN stripe smallint NOT NULL DEFAULT 0;
ALTER TABLE project_open_usage DROP CONSTRAINT project_open_usage_pkey;
ALTER TABLE project_open_usage ADD PRIMARY KEY (project_id, resource_class, user_id, stripe);

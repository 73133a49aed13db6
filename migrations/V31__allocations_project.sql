-- Each allocation carries its consumer's project and user, so that a quota
-- check reads a project's holds from one index range instead of visiting
-- every consumer of the project. The projection statement that writes the
-- consumer writes its allocations too, so the two always agree.
ALTER TABLE allocations ADD COLUMN project_id text, ADD COLUMN user_id text;
UPDATE allocations a SET project_id = c.project_id, user_id = c.user_id FROM consumers c WHERE c.uuid = a.consumer_uuid;
ALTER TABLE allocations ALTER COLUMN project_id SET NOT NULL, ALTER COLUMN user_id SET NOT NULL;
-- The consumer second: a project's new rows land all over its range of the
-- index, not on the one page every writer of the project would queue for.
CREATE INDEX allocations_project ON allocations (project_id, consumer_uuid);

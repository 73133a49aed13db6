-- Open-ended holds summed per project, user and class: the quota check's
-- counterpart of provider_open_usage. A raise then reads this row per user,
-- the few open-ended holds of the project that start inside its window, and
-- the project's bounded holds (leases) that overlap it, instead of every
-- hold the project ever made. Written by the statement that writes the
-- allocations; rebuilt and compared by replay, and checked against the
-- allocations by `berthd replay --verify`.
CREATE TABLE project_open_usage (
    project_id     text   NOT NULL,
    user_id        text   NOT NULL,
    resource_class text   NOT NULL,
    used           bigint NOT NULL,
    PRIMARY KEY (project_id, resource_class, user_id)
);
INSERT INTO project_open_usage (project_id, user_id, resource_class, used)
SELECT project_id, user_id, resource_class, sum(used) FROM allocations WHERE upper_inf(during) GROUP BY 1, 2, 3;

-- A project's holds, split as a provider's are (V32). The predicates say
-- the same as V32's in other words on purpose: the claim path runs on
-- generic plans, often made while the table is nearly empty, where every
-- index looks as cheap as any other; a query can use a partial index only
-- when its own conditions say the index's predicate, so the provider's
-- statements (`upper_inf`) can never pick these and the project's
-- statements (`upper(during) IS [NOT] NULL`) never pick the provider's.
CREATE INDEX allocations_project_open_start ON allocations (project_id, resource_class, lower(during))
    WHERE upper(during) IS NULL;
CREATE INDEX allocations_project_bounded ON allocations USING gist (project_id, resource_class, during)
    WHERE upper(during) IS NOT NULL;
DROP INDEX allocations_project;

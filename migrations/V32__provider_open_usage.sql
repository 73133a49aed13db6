-- Open-ended holds (Placement's, which hold from their start on) summed per
-- provider and class. Without it, a claim from now on reads every open-ended
-- hold on the provider, a cost that grows with every claim ever made there;
-- with it, the claim reads this one row, the few open-ended holds that
-- start inside its window, and the bounded holds (leases) that overlap it.
-- A projection like the others: written by the statement that writes the
-- allocations, rebuilt and compared by replay.
CREATE TABLE provider_open_usage (
    provider_uuid  uuid   NOT NULL,
    resource_class text   NOT NULL,
    used           bigint NOT NULL,
    PRIMARY KEY (provider_uuid, resource_class)
);
INSERT INTO provider_open_usage (provider_uuid, resource_class, used)
SELECT provider_uuid, resource_class, sum(used) FROM allocations WHERE upper_inf(during) GROUP BY 1, 2;

-- Open-ended holds by their start, and bounded holds by their window: the
-- two halves of a capacity check, each read from its own index.
CREATE INDEX allocations_open_start ON allocations (provider_uuid, resource_class, lower(during))
    WHERE upper_inf(during);
CREATE INDEX allocations_bounded ON allocations USING gist (provider_uuid, resource_class, during)
    WHERE NOT upper_inf(during);

-- A lease whose properties require texts of its hosts (a rack, a kind of
-- machine) finds the hosts holding them through this index
-- (queries::named_hosts) rather than by reading every host.
CREATE INDEX hosts_capabilities ON hosts USING gin (capabilities jsonb_path_ops);

-- Which berthd may run on this schema, for rolling upgrades: every binary
-- that knows migration `oldest_reader` or a later one. A release whose
-- migrations an older binary can live with (added tables, columns with
-- defaults, indexes) leaves it where it was; one that takes something away
-- raises it (berth-store migrate.rs, READERS_FROM).
CREATE TABLE berth_schema_compat (
    id int PRIMARY KEY CHECK (id = 1),
    oldest_reader int NOT NULL
);
INSERT INTO berth_schema_compat (id, oldest_reader) VALUES (1, 59);

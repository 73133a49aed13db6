-- How far in the log lease notifications have been delivered to every
-- configured sink: the cursor of the one berthd holding the notifier role
-- (an advisory lock). Not a projection: no event writes it, replay ignores
-- it. No row yet means the start of the log.
CREATE TABLE notifier_cursor (
    id       int    PRIMARY KEY CHECK (id = 1),
    txid     xid8   NOT NULL,
    position bigint NOT NULL
);

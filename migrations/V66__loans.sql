-- Loans: preemptible consumers' holds on idle capacity (berth_core::lend).
-- Kept apart from `allocations` on purpose: every other command's capacity
-- check reads `allocations` and so never sees a loan; a command that takes
-- capacity a loan sits on cuts the loan short instead.
CREATE TABLE loans (
    consumer_uuid  uuid        PRIMARY KEY REFERENCES consumers (uuid),
    -- When it is reclaimed (NULL: never, so far); `lead_s` before the
    -- capacity is needed.
    until          timestamptz,
    lead_s         bigint      NOT NULL CHECK (lead_s >= 0),
    lent_at        timestamptz NOT NULL,
    -- PENDING, CLAIMED (a manager is calling the plugins), DONE or ERROR.
    reclaim        text        NOT NULL DEFAULT 'PENDING',
    claimed_by     text,
    claim_expires  timestamptz,
    detail         jsonb
);
-- The manager's read of reclaims due.
CREATE INDEX loans_due ON loans (until) WHERE reclaim IN ('PENDING', 'CLAIMED');

CREATE TABLE loan_allocations (
    consumer_uuid  uuid      NOT NULL REFERENCES loans (consumer_uuid) ON DELETE CASCADE,
    -- A provider deleted once its loans ended takes their rows with it.
    provider_uuid  uuid      NOT NULL REFERENCES providers (uuid) ON DELETE CASCADE,
    -- No reference to resource_classes: a class renamed or deleted under a
    -- loan leaves the loan as it was lent.
    resource_class text      NOT NULL,
    used           bigint    NOT NULL CHECK (used > 0),
    during         tstzrange NOT NULL CHECK (NOT isempty(during)),
    ordinal        integer   NOT NULL
);
CREATE INDEX loan_allocations_consumer ON loan_allocations (consumer_uuid);
CREATE INDEX loan_allocations_timeline ON loan_allocations USING gist (provider_uuid, resource_class, during);

-- What Placement's reads show held: the allocations and the loans alike.
CREATE VIEW placement_holds AS
    SELECT consumer_uuid, provider_uuid, resource_class, used, during, ordinal FROM allocations
    UNION ALL
    SELECT consumer_uuid, provider_uuid, resource_class, used, during, ordinal FROM loan_allocations;

-- Raised by a command that would commit in one round trip (a lease's
-- creation) when a loan runs on a provider it writes to: it starts over
-- and cuts the loan short first (commands::loans). Asked in the same round
-- trip as the commit, so a cloud that lends nothing pays no round trip.
CREATE FUNCTION berth_no_loans_on(providers uuid[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM loan_allocations
               WHERE provider_uuid = ANY(providers) AND during && tstzrange(now(), NULL)) THEN
        RAISE EXCEPTION USING ERRCODE = 'BL001', MESSAGE = 'a loan runs on a provider written to: cut it first';
    END IF;
END $$;

-- What consumers draw from reservations' holds: an allocation made through
-- Placement with a reservation's CUSTOM_RESERVATION_<id> class is taken
-- from the reservation's slot on that provider instead of on top of it.
-- A projection of ReservationDrawn events.
CREATE TABLE reservation_draws (
    slot_consumer uuid  NOT NULL,
    consumer_uuid uuid  NOT NULL,
    resources     jsonb NOT NULL,
    PRIMARY KEY (slot_consumer, consumer_uuid)
);
CREATE INDEX reservation_draws_consumer ON reservation_draws (consumer_uuid);

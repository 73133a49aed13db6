-- The key that signs offers (POST /v1/offers): an offer's id carries what
-- it would book and a MAC made with this key, so any berthd sharing the
-- database can book it and nothing is kept per offer. Made here, by
-- PostgreSQL's strong random source (two random uuids, 244 random bits),
-- once per database. Not a projection: no event writes it, replay and the
-- log ignore it; a restored dump keeps it, so offers made before still book.
CREATE TABLE offer_key (
    id  int   PRIMARY KEY CHECK (id = 1),
    key bytea NOT NULL
);
INSERT INTO offer_key (id, key) VALUES (1, uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));

-- The IANA zone a recurring lease's schedule was read in (NULL: UTC, or
-- not recurring). A nullable column older binaries can live with: the
-- oldest reader stays where it was.
ALTER TABLE leases ADD COLUMN time_zone text;

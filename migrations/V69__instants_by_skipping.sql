-- Availability advice reads the instants holds end at one instant at a
-- time, skipping from each to the next (queries::ends, INSTANTS), rather
-- than every end: at 100,000 hosts with a million leases ending on the
-- hour an instant is the end of some 114 leases. The skip probes
-- allocations_bounded_end_host (V67) and, for maintenance windows, this
-- index of their ends, which were read whole and sorted.
CREATE INDEX maintenance_windows_end ON maintenance_windows (upper(during), provider_uuid);
-- The hosts that name a cleaning time of their own: the only ones whose
-- end is an instant other than the end plus the default, so each is probed
-- at every instant, where they are few.
CREATE INDEX hosts_own_cleaning ON hosts (provider_uuid) WHERE capabilities ? 'cleaning_time';

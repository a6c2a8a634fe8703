-- Lease connection setup: a fixed session time zone (expiry arithmetic uses UTC_TIMESTAMP(6)).
SET SESSION time_zone = '+00:00'

-- Migration 15: which clock each side's times come from. loadgen stamps a request's send inside
-- sendall and its chunk arrivals with the kernel's receive times (loadgen/timed_socket.py); the
-- engine server stamps a request's arrival with the kernel's receive time (wire_clock.py). Where
-- the OS or the transport offers no stamps, both fall back to the time the data was read.
ALTER TABLE requests ADD COLUMN arrival_clock VARCHAR;          -- 'kernel' | 'read'; NULL: older runs
ALTER TABLE server_requests ADD COLUMN received_clock VARCHAR;  -- 'kernel' | 'loop' | 'app'
-- How long stream data waited in the client's socket before it was read (p99 per second): the
-- error a client that stamps arrivals when it reads them would have made.
ALTER TABLE client_health ADD COLUMN read_delay_p99_ms DOUBLE;

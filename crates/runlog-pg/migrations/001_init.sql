-- runlog-pg schema, version 1. Applied at connect, idempotently (every statement is
-- IF NOT EXISTS), under a transaction-scoped advisory lock so concurrent connects do not race.
-- Run ids sort in byte order (COLLATE "C"), the order of list_runs in every backend.

CREATE TABLE IF NOT EXISTS runs (
    run_id          text COLLATE "C" PRIMARY KEY,
    -- The seq counter: the last committed seq (0 when empty). Updated in the same
    -- transaction as the events it counts, under SELECT ... FOR UPDATE.
    last_seq        bigint NOT NULL DEFAULT 0,
    -- Sum of the payload lengths of the committed events.
    committed_bytes bigint NOT NULL DEFAULT 0,
    created_at_ms   bigint NOT NULL,
    updated_at_ms   bigint NOT NULL,
    meta            bytea  NOT NULL DEFAULT '\x'::bytea
);

CREATE TABLE IF NOT EXISTS events (
    run_id          text COLLATE "C" NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    seq             bigint NOT NULL,
    event_id        bytea  NOT NULL CHECK (length(event_id) = 16),
    created_at_ms   bigint NOT NULL,
    kind            text   NOT NULL,
    correlation_id  text,
    key             text,
    payload         bytea  NOT NULL,
    PRIMARY KEY (run_id, seq),
    UNIQUE (run_id, event_id),
    UNIQUE (run_id, key)
);

CREATE TABLE IF NOT EXISTS runlog_schema_version (
    version integer PRIMARY KEY
);
INSERT INTO runlog_schema_version (version) VALUES (1) ON CONFLICT DO NOTHING;

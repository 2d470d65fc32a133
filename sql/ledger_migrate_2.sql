-- Privacy-budget ledger, schema version 2 (from version 1): the seeds charged per dataset (idempotent).
-- `ledger_seed_key` holds one random key (hex, made by dqrelease when the first seed is recorded);
-- `ledger_seeds` holds, per dataset, the HMAC-SHA256 under that key of each seed a charge was made with
-- (never the seed itself) and the run that used it. A seed is charged by one run per dataset: the primary key
-- makes a second run with the same seed fail even if it slipped past the check.
-- Rows are only ever inserted.

create table if not exists ledger_seed_key (
    key_hex varchar not null primary key,
    created_at_utc timestamp not null
);

create table if not exists ledger_seeds (
    dataset_id varchar not null,
    seed_hmac varchar not null,
    run_id varchar not null,
    charge_seq integer not null,
    recorded_at_utc timestamp not null,
    primary key (dataset_id, seed_hmac)
);

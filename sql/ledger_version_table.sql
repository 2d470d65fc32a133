-- The ledger's schema version, one row per applied version (created first, before any other table).
create table if not exists ledger_version (
    version integer not null primary key,
    applied_at_utc timestamp not null
);

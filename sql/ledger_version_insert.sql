-- Record that the ledger file now has schema version $version.
insert into ledger_version (version, applied_at_utc)
values ($version, $applied_at_utc);

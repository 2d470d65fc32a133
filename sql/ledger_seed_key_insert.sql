-- Record the ledger's key for seed hashes (once, in the transaction of the first seeded charge).
insert into ledger_seed_key (key_hex, created_at_utc)
values ($key_hex, $created_at_utc);

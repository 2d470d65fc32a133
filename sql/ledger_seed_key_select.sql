-- The ledger's key for seed hashes (no row until the first seeded charge).
select key_hex
from ledger_seed_key
order by created_at_utc
limit 1;

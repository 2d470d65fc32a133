-- The schema version of the ledger file (null for a file created a moment ago).
select max(version) as version
from ledger_version;

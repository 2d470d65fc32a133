-- Every charge of one dataset ($dataset_id) or of every dataset ($dataset_id null), oldest first.
with charges as (
    select * from ledger_charges
)

select
    dataset_id,
    seq,
    run_id,
    charged_at_utc,
    config_hash,
    mechanism,
    accounting_mode,
    epsilon_exact,
    delta_exact,
    rho_exact,
    note
from charges
where $dataset_id is null or dataset_id = $dataset_id
order by dataset_id, seq;

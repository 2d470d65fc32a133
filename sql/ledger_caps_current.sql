-- The current cap (largest seq) of one dataset ($dataset_id) or of every dataset ($dataset_id null).
with caps as (
    select * from ledger_caps
),

latest as (
    select
        dataset_id,
        max(seq) as seq
    from caps
    group by dataset_id
)

select
    caps.dataset_id,
    caps.seq,
    caps.set_at_utc,
    caps.epsilon_exact,
    caps.delta_exact,
    caps.rho_exact
from caps
inner join latest using (dataset_id, seq)
where $dataset_id is null or caps.dataset_id = $dataset_id
order by caps.dataset_id;

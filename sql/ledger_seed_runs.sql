-- The run that charged the seed with HMAC $seed_hmac on dataset $dataset_id (no row: the seed is unused).
with seeds as (
    select * from ledger_seeds
)

select run_id
from seeds
where dataset_id = $dataset_id and seed_hmac = $seed_hmac;

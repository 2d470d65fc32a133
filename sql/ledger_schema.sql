-- Privacy-budget ledger, schema version 1: caps, charges and the inspection view (idempotent); later versions
-- are the migrations applied on top of it (`ledger_migrate_<version>.sql`, also to a new file).
-- Amounts are stored twice: `*_exact` is the exact rational as text (Python `str(Fraction)`, e.g. `1/3`,
-- `3602879701896397/36028797018963968`) and is the only value the ledger compares with a cap; the double
-- column next to it is the nearest float, for reading and ad-hoc SQL only.
-- Rows are only ever inserted: caps are changed by appending a row (the largest seq is the current cap),
-- and charges are never updated, refunded or deleted.

create table if not exists ledger_caps (
    dataset_id varchar not null,
    seq integer not null,
    set_at_utc timestamp not null,
    epsilon_exact varchar not null,
    delta_exact varchar not null,
    rho_exact varchar,
    epsilon double not null,
    delta double not null,
    rho double,
    primary key (dataset_id, seq)
);

create table if not exists ledger_charges (
    dataset_id varchar not null,
    seq integer not null,
    run_id varchar not null,
    charged_at_utc timestamp not null,
    config_hash varchar not null,
    mechanism varchar not null,
    accounting_mode varchar not null,
    epsilon_exact varchar not null,
    delta_exact varchar not null,
    rho_exact varchar,
    epsilon double not null,
    delta double not null,
    rho double,
    note varchar not null,
    primary key (dataset_id, seq)
);

create view if not exists ledger_budget as
with caps as (
    select * from ledger_caps
),

charges as (
    select * from ledger_charges
),

current_caps as (
    select caps.*
    from caps
    where caps.seq = (select max(later.seq) from caps as later where later.dataset_id = caps.dataset_id)
),

spent as (
    select
        dataset_id,
        count(*) as charges,
        sum(epsilon) as epsilon_spent,
        sum(delta) as delta_spent,
        sum(rho) as rho_spent,
        count(*) - count(rho) as charges_without_rho
    from charges
    group by dataset_id
)

select
    current_caps.dataset_id,
    current_caps.epsilon as epsilon_cap,
    current_caps.delta as delta_cap,
    current_caps.rho as rho_cap,
    coalesce(spent.charges, 0) as charges,
    coalesce(spent.epsilon_spent, 0) as epsilon_spent,
    coalesce(spent.delta_spent, 0) as delta_spent,
    coalesce(spent.rho_spent, 0) as rho_spent,
    coalesce(spent.charges_without_rho, 0) as charges_without_rho
from current_caps
left join spent using (dataset_id)
order by current_caps.dataset_id;

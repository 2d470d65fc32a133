-- Append one charge (never updated or deleted afterwards).
insert into ledger_charges (
    dataset_id, seq, run_id, charged_at_utc, config_hash, mechanism, accounting_mode,
    epsilon_exact, delta_exact, rho_exact, epsilon, delta, rho, note
)
values (
    $dataset_id, $seq, $run_id, $charged_at_utc, $config_hash, $mechanism, $accounting_mode,
    $epsilon_exact, $delta_exact, $rho_exact, $epsilon, $delta, $rho, $note
);

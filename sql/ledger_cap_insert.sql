-- Append a cap row for $dataset_id; the row with the largest seq is the dataset's current cap.
insert into ledger_caps (
    dataset_id, seq, set_at_utc, epsilon_exact, delta_exact, rho_exact, epsilon, delta, rho
)
values (
    $dataset_id, $seq, $set_at_utc, $epsilon_exact, $delta_exact, $rho_exact, $epsilon, $delta, $rho
);

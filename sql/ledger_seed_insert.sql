-- Record that run $run_id charged dataset $dataset_id with the seed whose HMAC is $seed_hmac.
insert into ledger_seeds (dataset_id, seed_hmac, run_id, charge_seq, recorded_at_utc)
values ($dataset_id, $seed_hmac, $run_id, $charge_seq, $recorded_at_utc);

"""dqrelease: configs, ledger, ingestion, reports and the CLI around dq_engine."""

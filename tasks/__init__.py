"""Prefect tasks: thin wrappers around dq_engine and dqrelease functions."""

"""Prefect flows: they only compose tasks."""

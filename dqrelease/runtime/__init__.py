"""How a release runs: Prefect server, side process, Dask cluster, progress, pause points.

How a release runs: the local Prefect server, the side process for slow imports, the Dask cluster, per-round
progress and the test-only pause points. Imports nothing of the pipeline but :mod:`dqrelease.errors`.
"""

"""Public domains and the data they describe.

Public domains and the data they describe: attributes, datasets, workloads of marginal queries, their exact
answers, and the public constraints (edit rules) on records.

The innermost layer of the engine: it imports nothing of the engine but :mod:`dq_engine.errors`.
"""

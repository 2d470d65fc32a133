"""Privacy primitives: events, composition, calibration, exact samplers, the random stream.

Privacy primitives: cost as immutable events and their composition, the papers' theorems, calibration of a
mechanism to a target (ε, δ), the exact samplers privacy depends on (additive noise, exponential mechanism, the
query player's multiplicative weights) and the one place random generators are made.

Imports only :mod:`dq_engine.data` and :mod:`dq_engine.errors` of the engine.
"""

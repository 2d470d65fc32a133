"""The papers' game-based synthesizers and randomized response, with their parameter rules.

The papers' game-based synthesizers and their parameter rules: DualQuery, DQRS, FEM, sepFEM, DualQuery over
parity queries, and randomized response (one module each), with the default parameter rules in ``defaults``.

Imports the inner layers (:mod:`dq_engine.data`, :mod:`dq_engine.privacy`, :mod:`dq_engine.oracle`,
:mod:`dq_engine.fit`, :mod:`dq_engine.results`); nothing inner imports it.
"""

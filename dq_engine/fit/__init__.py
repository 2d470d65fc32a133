"""The measure-fit core: noisy marginals fitted by multiplicative weights, and the table fit.

The measure-fit core: noisy marginals, their selection and multiplicative-weights fit over a distribution
(the whole record universe or weighted particles), and the table fit that calibrates a mechanism's records with it.

MWEM (Hardt, Ligett & McSherry 2012) lives here because it *is* this loop: the registry's ``mwem`` and
``mwem-particles`` run it alone, the table fit runs it seeded with another mechanism's records. Imports
:mod:`dq_engine.data`, :mod:`dq_engine.privacy`, :mod:`dq_engine.oracle` and :mod:`dq_engine.results`.

One module a concept: ``mwem`` (the configuration, its privacy events and calibration, the loop), ``universe`` (the
whole-universe distribution), ``particles`` (the weighted particles), ``prior`` (the noisy one-way prior the particles
start from, and the noisy counts every measurement is made of) and ``table_fit``.
"""

"""How good a release is: fidelity, baselines and the error forecast.

How good a release is: its fidelity to the true table, the baselines it is compared with, and the forecast of
its error from public quantities. The outermost layer of the engine.
"""

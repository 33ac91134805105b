"""Benchmarks of hoodie_ray, each measured as ratios against baselines run in the same process.

``python -m benchmarks.mor_q1 --quick`` runs the MOR upsert benchmark described in
``../shared/bench/mor-q1.md``; :mod:`benchmarks.common` holds the pieces every benchmark shares
(data generation, CPU accounting, timers, the correctness gate and reporting).
"""

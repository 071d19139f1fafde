"""Baselines the benchmarks compare trio_session with."""

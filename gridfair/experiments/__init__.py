"""Experiments: many simulations at once, compared, swept over parameters, stored and plotted.

- `runs`: one simulation's parameters (`RunSpec`, with a deterministic key) and its outcome;
- `compare`: the same grid and workloads under several policies, aggregated over seeds;
- `spec`: a sweep file (TOML) expanded into runs;
- `store`: the SQLite results of a sweep, written as runs finish, so a sweep can resume;
- `runner`: runs in-process or on Dask distributed (a `LocalCluster` or a running scheduler);
- `plots`: the papers' figures drawn from stored results.
"""

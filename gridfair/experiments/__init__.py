"""Experiments: many simulations at once, compared, swept over parameters, stored and plotted.

- `runs`: one simulation's parameters (`RunSpec`, with a deterministic key) and its outcome;
- `measured`: one simulation run and measured, as `simulate`, `compare` and `sweep` run it;
- `compare`: the same grid and workloads under several policies, aggregated over seeds;
- `spec`: a sweep file (TOML) expanded into runs;
- `store`: the SQLite results of a sweep, written as runs finish, so a sweep can resume;
- `runner`: runs in-process or on Dask distributed (a `LocalCluster` or a running scheduler);
- `htcondor_runner`: runs as one cluster of jobs on an HTCondor pool, gathered from its event
  log; `pool_job`: what each of those jobs runs and sends back;
- `plots`: the papers' figures drawn from stored results.
"""

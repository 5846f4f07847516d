"""Tools the tests and the benchmarks share, outside the product package: synthetic pools
written as ad dumps (`synthetic`), a live pool's record of runs read back (`pool_record`),
and per-user waits accumulated online (`waits`).

Imported as `tests.harness.*`: a bench script puts the clone's root on its path first.
"""

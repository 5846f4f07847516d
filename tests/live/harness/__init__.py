"""The test and bench harness for live HTCondor: `personal_pool` (a personal pool of real
daemons and accounts) and `ha_pair` (two central managers sharing gridfair's HA lock). It lives
with the tests, outside the package: importable in a clone (tests, and bench/ scripts with the
repository on sys.path), never shipped in the wheel."""

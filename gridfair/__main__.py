"""`python -m gridfair ...`: the `gridfair` command."""

from gridfair.cli import main

main()

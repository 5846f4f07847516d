"""gridfair: fair-share negotiation for grids whose users own the machines."""

__version__ = "0.1.0"

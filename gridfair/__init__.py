"""gridfair: fair-share negotiation for grids whose users own the machines."""

import os

__version__ = "0.1.0"

# A compiled install runs its .py sources instead when asked (`pure_python`); checked here,
# before any of the compiled modules can be imported.
if os.environ.get("GRIDFAIR_PURE_PYTHON", "") not in ("", "0"):
    from gridfair import pure_python

    pure_python.install()

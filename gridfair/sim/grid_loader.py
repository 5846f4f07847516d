"""Where a grid comes from: a grid file (gridfair TOML or an iSPD `.imsx` model), or the name
of a grid embedded in the package (`gridfair grid list`), so that an installed gridfair has
grids to simulate and to run the demo daemon on without the repository.
"""

from __future__ import annotations

from pathlib import Path

from gridfair.errors import InputError
from gridfair.sim.grid import Grid, read_toml_grid

GRID_SUFFIXES = (".toml", ".imsx")


def embedded_grids() -> dict[str, Path]:
    """Embedded grid names -> files. A name is the file's stem, lower case, `_` as `-`."""
    return {path.stem.lower().replace("_", "-"): path
            for path in sorted(embedded_dir().iterdir()) if path.suffix in GRID_SUFFIXES}


def embedded_dir() -> Path:
    """The grid files shipped inside the package (package data of `gridfair.sim`)."""
    # Imported here: importlib.resources costs a run of a grid file 7 ms of start-up.
    from importlib.resources import files

    return Path(str(files("gridfair.sim").joinpath("embedded")))


def load_grid(grid: str | Path) -> Grid:
    """The grid in file `grid` (`.imsx`: an iSPD model; otherwise TOML) or, when no such file
    exists, the embedded grid of that name."""
    path = Path(grid)
    if not path.exists():
        embedded = embedded_grids()
        if str(grid) not in embedded:
            raise InputError(f"no such grid file, nor an embedded grid of that name "
                             f"(embedded: {', '.join(embedded)})", source=str(grid))
        path = embedded[str(grid)]
    if path.suffix.lower() == ".imsx":
        # Imported with its first model: it also registers the model's own load (the
        # "ispd-load" workloads only its grids have), and a TOML grid does not need it.
        from gridfair.sim.ispd import load_imsx

        return load_imsx(path)
    return read_toml_grid(path)

# The two commands of the README: both create the virtual environment when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# The negotiator on the embedded simulated grid (the HOSEP paper's Table 1).
run: $(STAMP)
	$(BIN)/gridfair simulate sim_grids/hosep_table1.toml --policy hosep --workload medium

# The whole suite, lint included.
test: $(STAMP)
	$(BIN)/ruff check gridfair tests bench
	$(BIN)/python -m pytest

bench: $(STAMP)
	for script in bench/*.py; do $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

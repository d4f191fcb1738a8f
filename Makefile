# Every target sets up .venv itself; a fresh machine needs only Python 3.11 with its
# headers, pip and a C compiler.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-all bench demo docs setup clean

setup: $(STAMP)

$(STAMP): setup.py constraints.txt $(wildcard gluonbatch/*/*.c gluonbatch/*/*.h)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test,examples,docs]'
	touch $(STAMP)

# Both tiers run in JOBS processes (pytest-xdist; JOBS=0 runs in this one), each test file
# whole in one of them: a module's fixtures, such as its Dask cluster, are made once.
JOBS ?= 2
PYTEST := $(PY) -m pytest -n $(JOBS) --dist loadfile

# The everyday tier: every test but those marked slow, a quarter of the hypothesis examples.
test: $(STAMP)
	$(PYTEST) -m 'not slow' --hypothesis-profile=quick

# Every test, the slow tier included: what CI runs.
test-all: $(STAMP)
	$(PYTEST)

# The benchmark table (gluonbatch vs gluoncv vs the floor), from the source tree's
# benchmarks package; BENCH_ARGS='--quick --only pad_labels --json out.json' and so on.
bench: $(STAMP)
	$(PY) -m benchmarks $(BENCH_ARGS)

# The main job on embedded data: Faster R-CNN and SSD loaders, and a picture of a batch.
demo: $(STAMP)
	$(VENV)/bin/gluonbatch demo -o demo_batch.png

# The HTML pages, warnings as errors; open docs/_build/html/index.html.
docs: $(STAMP)
	$(PY) -m sphinx -W --keep-going -n -b html docs docs/_build/html

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info

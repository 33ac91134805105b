# The project's command surface.
.PHONY: install test test-full lint bench quickstart

install:
	pip install -e ".[dev]"

test:
	python -m pytest -q -m "not slow"

test-full:
	HOODIE_RAY_FULL=1 python -m pytest -q -m ""

lint:
	ruff check hoodie_ray tests benchmarks examples
	ruff format --check hoodie_ray tests benchmarks examples
	mypy hoodie_ray

bench:
	python -m benchmarks.mor_q1 --quick

quickstart:
	python examples/quickstart.py

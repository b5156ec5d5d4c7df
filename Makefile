# A new user's entry points: `make demo` (the onboarding walkthrough) and `make test`.
PYTHON ?= python3.11
VENV   := .venv
CPU_VENV := .venv-cpu
PY     := $(VENV)/bin/python
OUT    ?= out

.PHONY: demo test lab cpu-server lint typecheck clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

# The real CPU inference server (transformers serve) lives in its own venv: torch first,
# from the CPU wheel, so that transformers[serving] never pulls a CUDA build.
$(CPU_VENV)/.installed:
	$(PYTHON) -m venv $(CPU_VENV)
	$(CPU_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CPU_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(CPU_VENV)/bin/python -m pip install --quiet 'transformers[serving]' tokenizers
	touch $@

cpu-server: $(CPU_VENV)/.installed

demo: $(VENV)/.installed
	$(PY) -m toolkit demo --out $(OUT)

test: $(VENV)/.installed $(CPU_VENV)/.installed
	$(PY) -m pytest

lab: $(VENV)/.installed
	$(VENV)/bin/jupyter lab notebooks/

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check toolkit tests benchmarks

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy toolkit

clean:
	rm -rf $(OUT) .pytest_cache

# A new user's entry points: `make demo` (the onboarding walkthrough), `make check` (the edit loop's tier:
# pure core and fast integration) and `make test` (every real part, as CI runs it).
# The first Python >= 3.11 on PATH (3.13, 3.12, 3.11, then python3); override with `make PYTHON=...`.
PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3; do \
	  command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && { echo $$p; exit 0; }; \
	done; echo python3.11)
VENV   := .venv
CPU_VENV := .venv-cpu
PY     := $(VENV)/bin/python
OUT    ?= out
# pytest-xdist workers. The real tier mostly waits on processes it started (servers, sshd, notebooks),
# so two workers fill two cores; `--dist loadgroup` keeps each group on one worker, so each costly shared set-up
# starts once (tests/conftest.py).
JOBS   ?= 2

.PHONY: demo check test lab cpu-server lint typecheck clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

# The real CPU inference server (transformers serve) lives in its own venv: torch first,
# from the CPU wheel, so that transformers[serving] never pulls a CUDA build.
# transformers is pinned because toolkit/testbeds/realserver.py spells this version's `serve` flags (5.x takes the
# model as a positional FORCE_MODEL; older releases used --force-model). The toolkit itself goes in without its
# dependencies so that `python -m toolkit.testbeds.tiny_model build DIR` runs here (it needs only the stdlib,
# torch and transformers). The last line fails the build if a CUDA torch slipped in.
$(CPU_VENV)/.installed:
	$(PYTHON) -m venv $(CPU_VENV)
	$(CPU_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CPU_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(CPU_VENV)/bin/python -m pip install --quiet 'transformers[serving]==5.24.0' tokenizers
	$(CPU_VENV)/bin/python -m pip install --quiet --no-deps -e .
	$(CPU_VENV)/bin/python -c "import sys, torch; sys.exit(f'{torch.__version__} is a CUDA build: install the CPU wheel first' if torch.version.cuda else 0)"
	touch $@

cpu-server: $(CPU_VENV)/.installed

demo: $(VENV)/.installed
	$(PY) -m toolkit demo --out $(OUT)

check: $(VENV)/.installed
	$(PY) -m pytest -m "not real" -n $(JOBS) --dist loadgroup

# Every test but the speed-measuring ones on JOBS workers, and beside them the speed-measuring ones on
# TIMING_JOBS workers at real-time priority (scripts/test_tiers.sh and tests/tiers.py say why); both always run.
TIMING_JOBS ?= 1
test: $(VENV)/.installed $(CPU_VENV)/.installed
	@scripts/test_tiers.sh $(PY) $(JOBS) $(TIMING_JOBS)

lab: $(VENV)/.installed  # saves notebooks/ without outputs (scripts/jupyter_lab_config.py): they are tracked templates
	$(VENV)/bin/jupyter lab --config=scripts/jupyter_lab_config.py notebooks/

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check toolkit tests benchmarks

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy toolkit

clean:
	rm -rf $(OUT) .pytest_cache

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

TEST_DEBS := prometheus-alertmanager postgresql chromium prometheus
# test files run side by side, one per core (at most four); `make test TEST_WORKERS=0` runs them in turn
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))

.PHONY: demo test test-deps lint bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,bench]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/rca demo

# Debian packages some tests use (they skip when missing): installed as root with apt, best effort.
test-deps:
	@missing=$$(for p in $(TEST_DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "test-deps: $$missing missing (not root or no apt-get); the tests that need them skip"; exit 0; fi; \
	export DEBIAN_FRONTEND=noninteractive; \
	timeout 300 apt-get install -y -q $$missing >/dev/null 2>&1 || \
	{ timeout 300 apt-get update -q >/dev/null 2>&1 && timeout 300 apt-get install -y -q $$missing >/dev/null 2>&1; } || \
	echo "test-deps: could not install $$missing; the tests that need them skip"

test: $(STAMP) test-deps
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile

bench: $(STAMP)
	$(BIN)/rca bench ingest --seconds 10

clean:
	rm -rf $(VENV) rca-data

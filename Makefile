# stm32ai developer entry points. `make demo` and `make test` set up a fresh machine first.
PYTHON ?= python3
MODEL ?= $(firstword $(wildcard ../shared/models/mlperf_tiny/pretrainedResnet_quant.tflite) tests/fixtures/models/conv_stride2_same_int8.tflite)
BOARD ?= qemu-netduinoplus2
DEMO_DIR ?= build/demo

.PHONY: setup demo test bench fits lint fixtures fuzz clean

setup: .setup-done
.setup-done: pyproject.toml scripts/setup.sh
	bash scripts/setup.sh
	touch $@

# Generate a firmware project for the emulated STM32F405 board, build it, run it in QEMU
# and print its UART output.
demo: setup
	@mkdir -p $(dir $(DEMO_DIR))
	$(PYTHON) -m stm32ai generate $(MODEL) --board $(BOARD) -o $(DEMO_DIR) --force
	$(PYTHON) -m stm32ai run $(DEMO_DIR)

test: setup
	$(PYTHON) -m pytest -q -n 2

# All models (slow; not part of `make test`/CI). A subset: make bench ONLY=kws,vww
bench: setup
	$(PYTHON) -m bench $(if $(ONLY),--only $(ONLY))

# Which shared model fits which board, internal / with external memory / not (docs/external_memory.md)
fits: setup
	$(PYTHON) -m bench.fits

# Long fuzz campaign of `generate --c-only` (docs/verifier.md): N mutants, table kind x outcome.
N ?= 10000
FUZZ_SEED ?= 1
fuzz: setup
	$(PYTHON) -m tests.fuzz -n $(N) --seed $(FUZZ_SEED) --keep build/fuzz-failures

lint:
	ruff check stm32ai tests bench

fixtures:
	$(PYTHON) tests/fixtures/make_fixtures.py
	$(PYTHON) tests/fixtures/make_fixtures_patterns.py

clean:
	rm -rf build .setup-done

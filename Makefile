# flashbed: the README's two commands are `make demo` and `make test`.
# Every target runs the project environment's tools (.venv, made by setup with python3 -m venv,
# or with $(PYTHON) when given: PYTHON=/path/to/python3.11 make setup).
VENV := .venv
PY := $(VENV)/bin/python
FLASHBED := $(VENV)/bin/flashbed

.PHONY: setup setup-tests demo smoke test test-unit lint bench image

setup:
	./scripts/setup.sh

# setup, and the Debian packages only the tests use (a browser, QEMU and what makes the emulated
# boards, an SSH server): make demo does not wait for them
setup-tests:
	./scripts/setup.sh --tests

# the main job: the quick profile (ten writable filesystems and two read-only images) on the default emulated
# device, in virtual time by flashbed run's default clock, auto (every timed figure the device model's, whatever
# the host's load; the cpu study in real time; README)
demo: setup
	$(FLASHBED) run --profile quick

# the tests on one worker more than the host has CPUs (pytest-xdist): the labs wait (on the SSH
# board, the emulated board's QEMU, a check's time limit, a probe's boots) and the extra worker
# fills that idle CPU (measured against one per CPU: docs/architecture.md).
# A module's tests share a worker unless the module spreads them (tests/conftest.py); the groups
# in collection order, the lab's slow ones first. WORKERS=N make test sets the count.
WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$((n + 1)))
XDIST := -n $(WORKERS) --dist loadgroup --no-loadscope-reorder

# ruff first (a second); then the emulator's Rust tests beside pytest, which starts at once: the
# tests (setup-tests built them; some 50 s, mostly one core) fill what the labs leave idle instead of
# coming first.
# cargo's output goes to emulator/target/test.log and is printed whole after pytest's; make test
# fails if either failed.
CARGO_TEST := cargo test --release --locked --manifest-path emulator/Cargo.toml
RUST_LOG := emulator/target/test.log

test: setup-tests
	$(PY) -m ruff check src tests
	@mkdir -p emulator/target; rust=; trap 'exit 130' INT TERM; trap '[ -z "$$rust" ] || kill $$rust 2>/dev/null' EXIT; \
	echo "$(CARGO_TEST) >$(RUST_LOG) 2>&1 &"; $(CARGO_TEST) >$(RUST_LOG) 2>&1 & rust=$$!; \
	echo "$(PY) -m pytest -q $(XDIST)"; $(PY) -m pytest -q $(XDIST); py=$$?; \
	wait $$rust; rs=$$?; rust=; echo "--- $(CARGO_TEST) (beside pytest): its output"; cat $(RUST_LOG); \
	[ $$rs -eq 0 ] || echo "make test: cargo test failed (exit $$rs): its output is above and in $(RUST_LOG)" >&2; \
	[ $$py -eq 0 ] || echo "make test: pytest failed (exit $$py)" >&2; \
	[ $$py -eq 0 ] && [ $$rs -eq 0 ]

smoke: setup
	$(FLASHBED) lab smoke

# fast tests only: no lab kernel boots, no emulator processes (the project environment: made
# by setup if it is not there)
test-unit: $(PY)
	$(PY) -m pytest -q $(XDIST) -m "not lab and not emulator"

# the imports sorted and none unused (ruff, pyproject.toml's [tool.ruff]); `make test` runs it first
lint: $(PY)
	$(PY) -m ruff check src tests

$(PY):
	./scripts/setup.sh

# the container image for every other host (Containerfile; README, Hosts), with podman or docker
BASE ?= debian:trixie
image:
	@engine=$$(command -v podman || command -v docker) \
	    || { echo "make image: needs podman or docker (apt-get install podman)" >&2; exit 2; }; \
	echo "$$engine build --build-arg BASE=$(BASE) -t flashbed -f Containerfile ."; \
	$$engine build --build-arg BASE=$(BASE) -t flashbed -f Containerfile .

bench: setup
	$(FLASHBED) bench lab --kernel 6.12 --kernel 7.3 --runs 3
	$(FLASHBED) lab bench-boot --boots 7 --compare-pinning
	emulator/target/release/flashbed-bench all
	$(FLASHBED) bench fuse --runs 5
	$(FLASHBED) bench hostcall --calls 300
	$(FLASHBED) bench presets
	$(FLASHBED) bench powercut --cycles 20
	$(FLASHBED) bench crashstates --device emmc-8g@64M
	$(FLASHBED) bench clock --device emmc-8g@512M --hog
	$(FLASHBED) bench cpu --device emmc-8g@512M
	$(FLASHBED) bench clock --profile quick --device emmc-8g@512M
	$(FLASHBED) bench clock --profile quick --device sandisk-ultra-fit-32g@512M

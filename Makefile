# flashbed: the README's two commands are `make demo` and `make test`.
PYTHON ?= python3

.PHONY: setup demo test test-unit bench smoke

setup:
	./scripts/setup.sh

# the main job on the default device
demo: setup
	$(PYTHON) -m flashbed.cli lab smoke

test: setup
	@if [ -f emulator/Cargo.toml ]; then cargo test --release --manifest-path emulator/Cargo.toml; fi
	$(PYTHON) -m pytest -q

# fast tests only: no lab kernel boots, no emulator processes
test-unit:
	$(PYTHON) -m pytest -q -m "not lab and not emulator"

bench: setup
	$(PYTHON) -m flashbed.cli lab bench-boot --boots 7

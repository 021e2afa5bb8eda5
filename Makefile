# flashbed: the README's two commands are `make demo` and `make test`.
PYTHON ?= python3

.PHONY: setup demo smoke test test-unit bench

setup:
	./scripts/setup.sh

# the main job: the quick profile (ten writable filesystems and two read-only images) on the default emulated
# device, in virtual time by flashbed run's default clock, auto (every timed figure the device model's, whatever
# the host's load; the cpu study in real time; README)
demo: setup
	$(PYTHON) -m flashbed.cli run --profile quick

test: setup
	@if [ -f emulator/Cargo.toml ]; then cargo test --release --manifest-path emulator/Cargo.toml; fi
	$(PYTHON) -m pytest -q

smoke: setup
	$(PYTHON) -m flashbed.cli lab smoke

# fast tests only: no lab kernel boots, no emulator processes
test-unit:
	$(PYTHON) -m pytest -q -m "not lab and not emulator"

bench: setup
	$(PYTHON) -m flashbed.cli bench lab --kernel 6.12 --kernel 7.3 --runs 3
	$(PYTHON) -m flashbed.cli lab bench-boot --boots 7 --compare-pinning
	emulator/target/release/flashbed-bench all
	$(PYTHON) -m flashbed.cli bench fuse --runs 5
	$(PYTHON) -m flashbed.cli bench hostcall --calls 300
	$(PYTHON) -m flashbed.cli bench presets
	$(PYTHON) -m flashbed.cli bench powercut --cycles 20
	$(PYTHON) -m flashbed.cli bench crashstates --device emmc-8g@64M
	$(PYTHON) -m flashbed.cli bench clock --device emmc-8g@512M --hog
	$(PYTHON) -m flashbed.cli bench cpu --device emmc-8g@512M
	$(PYTHON) -m flashbed.cli bench clock --profile quick --device emmc-8g@512M
	$(PYTHON) -m flashbed.cli bench clock --profile quick --device sandisk-ultra-fit-32g@512M

# Thin entry points over CMake. The README's two commands:
#   make train   install what building and training need, build without the test suite, train
#                the default model on the default device
#   make test    install that and the test tools, build, run the whole test suite (ctest)
# Other targets: deps, build, sanitize (ASan+UBSan build running the unit, net and gpu tests),
# fuzz (the libFuzzer targets of fuzz/, built with clang in build-fuzz), fuzz-run (each target for
# FUZZ_SECONDS, default 60; FUZZ_TARGETS=name... for some), format / format-check (clang-format,
# .clang-format), windows (the Windows build, cross-compiled with mingw-w64 into build-win: the
# dependencies from Debian's source packages, then the libraries and tests; cmake/mingw-w64.cmake),
# windows-test (its tests under Wine, on Xvfb; scripts/windows-test.sh), clean.
# Variables: BUILD (build directory), WERROR=ON (warnings are errors, as in CI), JOBS, TESTS
# (ON: build the test suite; make train sets OFF).

BUILD ?= build
WERROR ?= OFF
TESTS ?= ON
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
WIN_BUILD ?= build-win
WIN_PREFIX ?= $(WIN_BUILD)/deps

.PHONY: all deps deps-train build test train sanitize fuzz fuzz-run windows windows-test format \
	format-check clean

all: build

deps:
	sh scripts/install-deps.sh --test

deps-train:
	sh scripts/install-deps.sh

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DVKG_WERROR=$(WERROR) \
		-DVKG_BUILD_TESTS=$(TESTS) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

test: deps build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

train: TESTS = OFF
train: deps-train build
	sh scripts/train-default.sh $(BUILD)

sanitize: deps
	cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DVKG_SANITIZE=ON -DVKG_WERROR=$(WERROR) $(CMAKE_FLAGS)
	cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -L 'unit|net'
	# The shader tests too, without leak detection: the Vulkan driver (lavapipe's LLVM) keeps
	# allocations that LeakSanitizer reports from already unloaded modules.
	cd $(BUILD)-asan && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure -j $(JOBS) -L gpu

# libFuzzer needs clang; docs/FUZZING.md. The targets' seeds are fuzz/corpus/NAME (never written).
fuzz:
	cmake -S . -B $(BUILD)-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DVKG_FUZZ=ON -DVKG_BUILD_TESTS=OFF -DVKG_WERROR=$(WERROR) $(CMAKE_FLAGS)
	cmake --build $(BUILD)-fuzz -j $(JOBS) --target vkg_fuzzers

fuzz-run: fuzz
	sh fuzz/run.sh $(BUILD)-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Windows (x86_64, mingw-w64), warnings as errors; its tests run under Wine (windows-test).
windows:
	VKG_WIN_PREFIX=$(abspath $(WIN_PREFIX)) JOBS=$(JOBS) sh scripts/windows-deps.sh
	cmake -S . -B $(WIN_BUILD) -DCMAKE_TOOLCHAIN_FILE=$(CURDIR)/cmake/mingw-w64.cmake \
		-DVKG_WIN_PREFIX=$(abspath $(WIN_PREFIX)) -DCMAKE_BUILD_TYPE=Release -DVKG_WERROR=ON \
		-DVKG_BUILD_TESTS=ON $(CMAKE_FLAGS)
	cmake --build $(WIN_BUILD) -j $(JOBS)

# The Linux build too: windows_train_matches_linux compares vkgpt.exe with build/vkgpt.
windows-test: build
	sh scripts/windows-test.sh $(WIN_BUILD) -j $(JOBS)

# clang-format with the project's .clang-format over every tracked C file.
format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-fuzz

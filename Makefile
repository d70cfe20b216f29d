# Makefile: builds libsyncbench (core + engines + trainer; the shared libsyncbench.so with the public API of
# include/syncbench.h), the harness and the Criterion tests.
# CUDA is auto-detected (nvcc and nccl.h under CUDA_HOME); `make CUDA=0` forces a host-only build.
CUDA_HOME ?= /usr/local/cuda
CUDA ?= $(shell test -x $(CUDA_HOME)/bin/nvcc && test -f $(CUDA_HOME)/include/nccl.h && echo 1 || echo 0)
BUILD ?= build
CC ?= gcc
NVCC ?= $(CUDA_HOME)/bin/nvcc
PKGS := libzmq msgpack hwloc openblas libsodium jansson
OPT ?= -O3 -march=x86-64-v2
# -ffp-contract=off: no FMA contraction on the host (core/optim.c must match the device optimizer bit
# for bit whatever -std or -march says; -std=c11 implies it today, gnu11 or -march=native would not).
# -fPIC: the same objects go into libsyncbench.a and libsyncbench.so.
CFLAGS += -std=c11 $(OPT) -fPIC -ffp-contract=off -g -Wall -Wextra -Werror -D_GNU_SOURCE -I. \
          $(shell pkg-config --cflags $(PKGS) 2>/dev/null) -pthread -MMD -MP
LDLIBS += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm -lrt
NVFLAGS ?= -O3 -std=c++17 -I. -arch=sm_90 -gencode arch=compute_90,code=sm_90 \
           -gencode arch=compute_100,code=sm_100 -Xcompiler -Wall,-Werror,-fPIC
# The device optimizers are compared bit for bit with core/optim.c: no FMA there either (their
# __fmul_rn/__fadd_rn already forbid it; this keeps any plain expression added later honest).
$(BUILD)/obj/core/cuda/optim.cu.o: NVFLAGS += -fmad=false

ifeq ($(CUDA),1)
CFLAGS += -DSB_CUDA=1 -I$(CUDA_HOME)/include
LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lnccl -lcublas -lcudart -lstdc++
VARIANT_SKIP := %_nocuda.c
else
VARIANT_SKIP := %_cuda.c
endif

LIB_DIRS := core ring allreduce-tree ps trainer
# OpenMPI's compiler wrapper found (or MPI=1): the mpi/ engine is built and registered; `make MPI=0` leaves it out.
MPI ?= $(shell command -v mpicc >/dev/null 2>&1 && mpicc --showme:link >/dev/null 2>&1 && echo 1 || echo 0)
ifeq ($(MPI),1)
CFLAGS += -DSB_MPI=1 $(shell mpicc --showme:compile)
LDLIBS += $(shell mpicc --showme:link)
LIB_DIRS += mpi
endif
LIB_C    := $(filter-out $(VARIANT_SKIP),$(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c)))
LIB_CU   := $(if $(filter 1,$(CUDA)),$(foreach d,$(LIB_DIRS) core/cuda,$(wildcard $(d)/*.cu)))
LIB_OBJ  := $(LIB_C:%.c=$(BUILD)/obj/%.o) $(LIB_CU:%.cu=$(BUILD)/obj/%.cu.o)
# harness/ is in rooms (cli/ launch/ modes/ emulate/ model/ report/ record/ registry/, docs/ARCHITECTURE.md):
# all of it but main.c is libharness.a, which the harness program and the tests link.
# SimGrid (Debian libsimgrid-dev) found by pkg-config, or SIMGRID=1: `harness simulate` replays schedules on it;
# `make SIMGRID=0` (or no SimGrid) builds harness/simulate/*_nosimgrid.c instead, which says so.
SIMGRID ?= $(shell pkg-config --exists simgrid 2>/dev/null && echo 1 || echo 0)
ifeq ($(SIMGRID),1)
CFLAGS += -DSB_SIMGRID=1 $(shell pkg-config --cflags simgrid)
LDLIBS += $(shell pkg-config --libs simgrid) -lstdc++
SIM_SKIP := %_nosimgrid.c
# one small C++ file: what SimGrid 3.32's C API does not say (a communication's bytes to go)
HARNESS_CXX := $(wildcard harness/simulate/*_simgrid.cpp)
else
SIM_SKIP := %_simgrid.c
endif
CXXFLAGS ?= $(OPT) -fPIC -g -Wall -Wextra -Werror
HARNESS_C := $(filter-out $(SIM_SKIP),$(wildcard harness/*/*.c))
HARNESS_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(HARNESS_C)) $(patsubst %.cpp,$(BUILD)/obj/%.cpp.o,$(HARNESS_CXX))
HARNESS_MAIN := $(BUILD)/obj/harness/main.o
HLIB := $(BUILD)/libharness.a
TEST_LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/lib/*.c))
TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/test_*.c))
LIB := $(BUILD)/libsyncbench.a
# The shared library of the public API (include/syncbench.h, docs/api.md): core, the host engines and api/,
# exporting only sb_* and syncbench_* (api/syncbench.map); SONAME libsyncbench.so.MAJOR.
SO_VER := $(shell sed -n 's/^\#define SYNCBENCH_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' include/syncbench.h | paste -sd.)
SO_MAJOR := $(firstword $(subst ., ,$(SO_VER)))
# api/ is only in the shared library (libsyncbench.a holds no sb_* symbol, so test_api links both unambiguously).
SO_DIRS := core ring allreduce-tree ps
API_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard api/*.c))
SO_OBJ := $(filter $(SO_DIRS:%=$(BUILD)/obj/%/%),$(LIB_OBJ)) $(API_OBJ)
SO := $(BUILD)/libsyncbench.so.$(SO_VER)
SO_LINKS := $(BUILD)/libsyncbench.so.$(SO_MAJOR) $(BUILD)/libsyncbench.so
PC := $(BUILD)/syncbench.pc

.PHONY: all deps run test clean paper peers docs
all: $(BUILD)/harness $(TESTS) $(SO_LINKS) $(PC)

# A missing library is named (pkg-config, package by package) before any compiling, not found by the linker.
# Debian/Ubuntu packages: libzmq3-dev libmsgpack-dev (Ubuntu: universe) libhwloc-dev libopenblas-dev
# libsodium-dev libjansson-dev libcriterion-dev; `make deps` installs them (root or sudo), nothing else here needs root.
PKGS_DEB := libzmq:libzmq3-dev msgpack:libmsgpack-dev hwloc:libhwloc-dev openblas:libopenblas-dev \
            libsodium:libsodium-dev jansson:libjansson-dev criterion:libcriterion-dev
.PHONY: check-libs check-criterion
check-libs:
	@command -v pkg-config >/dev/null || { echo "make: pkg-config is missing (Debian: pkg-config); make deps installs it" >&2; exit 1; }
	@scripts/check-libs $(PKGS) -- $(PKGS_DEB)
check-criterion:
	@scripts/check-libs criterion -- $(PKGS_DEB)
$(LIB_OBJ) $(API_OBJ) $(HARNESS_OBJ) $(HARNESS_MAIN) $(TEST_LIB_OBJ): | check-libs
$(TESTS): | check-criterion

# make install PREFIX=DIR (default /usr/local; DESTDIR for packaging): harness on PATH with a syncbench
# alias, the harness(1) man page and bash completion, both generated from `harness --help`.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man/man1
COMPDIR ?= $(PREFIX)/share/bash-completion/completions
LIBDIR ?= $(PREFIX)/lib
INCDIR ?= $(PREFIX)/include
PCDIR ?= $(LIBDIR)/pkgconfig
.PHONY: install uninstall man completion
man: $(BUILD)/harness.1
completion: $(BUILD)/harness.bash
$(BUILD)/harness.1: $(BUILD)/harness scripts/gen-man
	scripts/gen-man $(BUILD)/harness > $@.tmp && mv $@.tmp $@
$(BUILD)/harness.bash: $(BUILD)/harness scripts/gen-completion
	scripts/gen-completion $(BUILD)/harness > $@.tmp && mv $@.tmp $@
install: $(BUILD)/harness $(BUILD)/harness.1 $(BUILD)/harness.bash $(SO_LINKS) $(PC)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR) $(DESTDIR)$(COMPDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCDIR) \
	    $(DESTDIR)$(PCDIR)
	install -m 755 $(SO) $(DESTDIR)$(LIBDIR)/$(notdir $(SO))
	ln -sf $(notdir $(SO)) $(DESTDIR)$(LIBDIR)/libsyncbench.so.$(SO_MAJOR)
	ln -sf libsyncbench.so.$(SO_MAJOR) $(DESTDIR)$(LIBDIR)/libsyncbench.so
	install -m 644 include/syncbench.h $(DESTDIR)$(INCDIR)/syncbench.h
	install -m 644 $(PC) $(DESTDIR)$(PCDIR)/syncbench.pc
	install -m 755 $(BUILD)/harness $(DESTDIR)$(BINDIR)/harness
	ln -sf harness $(DESTDIR)$(BINDIR)/syncbench
	install -m 644 $(BUILD)/harness.1 $(DESTDIR)$(MANDIR)/harness.1
	ln -sf harness.1 $(DESTDIR)$(MANDIR)/syncbench.1
	install -m 644 $(BUILD)/harness.bash $(DESTDIR)$(COMPDIR)/harness
	ln -sf harness $(DESTDIR)$(COMPDIR)/syncbench
	@echo "installed: $(DESTDIR)$(BINDIR)/harness (and syncbench), man harness, bash completion in $(DESTDIR)$(COMPDIR)"
	@echo "installed: libsyncbench $(SO_VER) in $(DESTDIR)$(LIBDIR), syncbench.h in $(DESTDIR)$(INCDIR), syncbench.pc in $(DESTDIR)$(PCDIR)"
uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(notdir $(SO)) $(DESTDIR)$(LIBDIR)/libsyncbench.so.$(SO_MAJOR) $(DESTDIR)$(LIBDIR)/libsyncbench.so \
	      $(DESTDIR)$(INCDIR)/syncbench.h $(DESTDIR)$(PCDIR)/syncbench.pc
	rm -f $(DESTDIR)$(BINDIR)/harness $(DESTDIR)$(BINDIR)/syncbench $(DESTDIR)$(MANDIR)/harness.1 \
	      $(DESTDIR)$(MANDIR)/syncbench.1 $(DESTDIR)$(COMPDIR)/harness $(DESTDIR)$(COMPDIR)/syncbench

deps:
	@scripts/install-deps

$(LIB): $(LIB_OBJ)
	@mkdir -p $(@D)
	$(AR) rcs $@ $^

$(SO): $(SO_OBJ) api/syncbench.map
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libsyncbench.so.$(SO_MAJOR) -Wl,--version-script=api/syncbench.map -Wl,--no-undefined \
	    -o $@ $(SO_OBJ) $(LDLIBS)
$(SO_LINKS): $(SO)
	ln -sf $(notdir $(SO)) $(BUILD)/libsyncbench.so.$(SO_MAJOR)
	ln -sf libsyncbench.so.$(SO_MAJOR) $(BUILD)/libsyncbench.so
$(PC): api/syncbench.pc.in Makefile
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCDIR@|$(INCDIR)|' -e 's|@VERSION@|$(SO_VER)|' $< > $@
# test_api tests the shared library itself, through the public header alone (and the rank launcher).
# (-lsyncbench first: the API's symbols come from the .so; the rank launcher's from libsyncbench.a.)
$(BUILD)/tests/test_api: tests/test_api.c $(BUILD)/obj/tests/lib/ranks.o $(SO_LINKS) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< -L$(BUILD) -lsyncbench -Wl,-rpath,'$$ORIGIN/..' $(BUILD)/obj/tests/lib/ranks.o $(LIB) \
	    $(shell pkg-config --libs criterion 2>/dev/null) $(LDLIBS)

$(HLIB): $(HARNESS_OBJ)
	@mkdir -p $(@D)
	$(AR) rcs $@ $^

$(BUILD)/harness: $(HARNESS_MAIN) $(HLIB) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(HARNESS_MAIN) $(HLIB) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_LIB_OBJ) $(HLIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(TEST_LIB_OBJ) $(HLIB) $(LIB) $(shell pkg-config --libs criterion 2>/dev/null) $(LDLIBS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

# The git sha (and -dirty) of this source tree, baked into the harness (result metadata, --version):
# scripts/gen-version runs on every make and rewrites the header only when the text changes.
SB_VERSION_H := $(BUILD)/gen/sb_version.h
.PHONY: FORCE
FORCE:
$(SB_VERSION_H): FORCE
	@mkdir -p $(@D)
	@scripts/gen-version $@
$(BUILD)/obj/harness/record/result.o: $(SB_VERSION_H)
$(BUILD)/obj/api/comm.o: $(SB_VERSION_H)
CFLAGS += -I$(BUILD)/gen

$(BUILD)/obj/%.cpp.o: %.cpp
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -std=c++17 $(shell pkg-config --cflags simgrid) -c -o $@ $<

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -c -o $@ $<

# The two commands of the README: both install what is missing first.
run: deps
	@$(MAKE) --no-print-directory $(BUILD)/harness
	$(BUILD)/harness run

test: deps
	@$(MAKE) --no-print-directory all
	@scripts/run-tests $(BUILD)/tests
	@$(MAKE) --no-print-directory fuzz-short

paper:
	@$(MAKE) --no-print-directory -C paper

# docs/results.md and README.md's headline block, generated from results/ (tests/test_docs.c fails when stale)
docs:
	@scripts/gen-docs

clean:
	rm -rf $(BUILD)

-include $(LIB_OBJ:.o=.d) $(API_OBJ:.o=.d) $(HARNESS_OBJ:.o=.d) $(HARNESS_MAIN:.o=.d) $(TEST_LIB_OBJ:.o=.d)
-include $(TESTS:=.d)

# The peers we compare against, built only on request: OpenMPI's MPI_Allreduce alone, and PyTorch
# (DDP over gloo) in a virtual environment, peers/.venv, from the Python package index; torchvision and Hugging
# Face transformers (the same index) for syncbench-profile's model names; versions pinned in peers/requirements.txt
# (a changed pin reinstalls into the existing venv).
peers: $(BUILD)/peers/mpi_allreduce peers/.venv/.done
peers/.venv/.done: peers/requirements.txt
	@echo "make peers: PyPI's torch for Linux x86-64 is the CUDA build: a 539 MB wheel plus ~3 GB of CUDA libraries"
	@[ -x peers/.venv/bin/pip ] || python3 -m venv peers/.venv
	peers/.venv/bin/pip install --quiet -r peers/requirements.txt
	touch $@
# make python: the syncbench package (python/, pure Python over libsyncbench.so) into PYVENV (default peers/.venv,
# beside torch; made when missing); no compiler and no download (--no-build-isolation: the venv's setuptools).
PYVENV ?= peers/.venv
.PHONY: python
python: $(SO_LINKS)
	@[ -x $(PYVENV)/bin/pip ] || python3 -m venv $(PYVENV)
	$(PYVENV)/bin/pip install --quiet --no-build-isolation ./python
	$(PYVENV)/bin/python -c 'import syncbench, syncbench._lib as l; print("syncbench", syncbench.version(), "from", l.where())'
$(BUILD)/peers/mpi_allreduce: peers/mpi_allreduce.c
	@mkdir -p $(@D)
	mpicc -O3 -o $@ $<

# The gradient profiles are built into the binary (.incbin in trainer/workload.c).
$(BUILD)/obj/trainer/workload.o: $(wildcard workloads/*.tsv)

# Fuzzing (fuzz/): libFuzzer targets built with clang, host-only, with ASan + UBSan, into $(FUZZ_BUILD).
# `make fuzz` runs each target FUZZ_SECONDS on its committed seed corpus fuzz/corpus/NAME (new inputs go to
# $(FUZZ_BUILD)/corpus/NAME, crashes to $(FUZZ_BUILD)/crashes/) and prints executions and coverage;
# `make fuzz-short` is the short pass `make test` runs (skipped, saying why, without clang's libFuzzer);
# `make fuzz-corpus` rewrites the generated seeds with the project's own writers (fuzz/mkcorpus.c).
FUZZ_CC ?= clang
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SHORT_SECONDS ?= 4
FUZZ_NAMES := $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# clang 14 does not know every CPU feature name gcc does (f16c): the fuzz build takes the portable kernels
FUZZ_SAN += '-D__builtin_cpu_supports(f)=0'
FUZZ_CFLAGS = -std=c11 -O1 -g -Wall -Wextra -Werror -D_GNU_SOURCE -I. $(shell pkg-config --cflags $(PKGS) 2>/dev/null) \
              -pthread $(FUZZ_SAN) -MMD -MP
FUZZ_LDLIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm -lrt
FUZZ_LIB_C := $(filter-out %_cuda.c mpi/%,$(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))) harness/record/jsonl.c
FUZZ_LIB := $(FUZZ_BUILD)/libsyncbench-fuzz.a
FUZZ_OK = $(shell printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' | \
            $(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1 && echo 1)
FUZZ_WHY = $(FUZZ_CC) cannot build libFuzzer targets (-fsanitize=fuzzer); install clang and libclang-rt-dev (make deps)

.PHONY: fuzz fuzz-short fuzz-build fuzz-corpus
fuzz-build: $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz_%)

fuzz:
	@[ -n "$(FUZZ_OK)" ] || { echo "fuzz: $(FUZZ_WHY)" >&2; exit 1; }
	@$(MAKE) --no-print-directory fuzz-build
	@fuzz/run $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_NAMES)

fuzz-short:
	@if [ -z "$(FUZZ_OK)" ]; then echo "fuzz: short pass skipped: $(FUZZ_WHY)"; else \
	  $(MAKE) --no-print-directory fuzz-build && fuzz/run $(FUZZ_BUILD) $(FUZZ_SHORT_SECONDS) $(FUZZ_NAMES); fi

fuzz-corpus: $(FUZZ_BUILD)/mkcorpus
	$(FUZZ_BUILD)/mkcorpus fuzz/corpus

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_LIB): $(FUZZ_LIB_C:%.c=$(FUZZ_BUILD)/obj/%.o)
	$(AR) rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB) $(FUZZ_LDLIBS)

$(FUZZ_BUILD)/mkcorpus: fuzz/mkcorpus.c fuzz/fuzz.h $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -o $@ $< $(FUZZ_LIB) $(FUZZ_LDLIBS)

-include $(FUZZ_LIB_C:%.c=$(FUZZ_BUILD)/obj/%.d)

# Makefile: builds libsyncbench (core + engines + trainer), the harness and the Criterion tests.
# CUDA is auto-detected (nvcc and nccl.h under CUDA_HOME); `make CUDA=0` forces a host-only build.
CUDA_HOME ?= /usr/local/cuda
CUDA ?= $(shell test -x $(CUDA_HOME)/bin/nvcc && test -f $(CUDA_HOME)/include/nccl.h && echo 1 || echo 0)
BUILD ?= build
CC ?= gcc
NVCC ?= $(CUDA_HOME)/bin/nvcc
PKGS := libzmq msgpack hwloc openblas libsodium
OPT ?= -O3 -march=x86-64-v2
CFLAGS += -std=c11 $(OPT) -g -Wall -Wextra -Werror -D_GNU_SOURCE -I. \
          $(shell pkg-config --cflags $(PKGS) 2>/dev/null) -pthread -MMD -MP
LDLIBS += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm -lrt
NVFLAGS ?= -O3 -std=c++17 -I. -arch=sm_90 -gencode arch=compute_90,code=sm_90 \
           -gencode arch=compute_100,code=sm_100 -Xcompiler -Wall,-Werror,-fPIC

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
HARNESS_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard harness/*.c))
TEST_LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/lib/*.c))
TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/test_*.c))
LIB := $(BUILD)/libsyncbench.a

.PHONY: all deps run test clean paper peers
all: $(BUILD)/harness $(TESTS)

deps:
	@scripts/install-deps

$(LIB): $(LIB_OBJ)
	@mkdir -p $(@D)
	$(AR) rcs $@ $^

$(BUILD)/harness: $(HARNESS_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(HARNESS_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_LIB_OBJ) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(TEST_LIB_OBJ) $(LIB) $(shell pkg-config --libs criterion 2>/dev/null) $(LDLIBS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

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

paper:
	@$(MAKE) --no-print-directory -C paper

clean:
	rm -rf $(BUILD)

-include $(LIB_OBJ:.o=.d) $(HARNESS_OBJ:.o=.d) $(TEST_LIB_OBJ:.o=.d)

# The peers we compare against, built only on request: OpenMPI's MPI_Allreduce alone, and PyTorch
# (DDP over gloo) in a virtual environment, peers/.venv, from the Python package index.
peers: $(BUILD)/peers/mpi_allreduce peers/.venv/.done
peers/.venv/.done:
	@echo "make peers: PyPI's torch for Linux x86-64 is the CUDA build: a 539 MB wheel plus ~3 GB of CUDA libraries"
	python3 -m venv peers/.venv
	peers/.venv/bin/pip install --quiet torch numpy
	touch $@
$(BUILD)/peers/mpi_allreduce: peers/mpi_allreduce.c
	@mkdir -p $(@D)
	mpicc -O3 -o $@ $<

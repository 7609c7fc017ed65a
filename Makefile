# loom - build, test, bench. See README.md.
CC      ?= cc
# Parallel by default: CI runs a plain `make test` on a fresh 2-core machine, and the
# three build variants it compiles (plus clang-check) dominate its time. One job per
# core unless the caller gave -j.
ifeq ($(filter -j%,$(MAKEFLAGS)),)
  MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif
CXX     ?= c++
PREFIX  ?= /usr/local
BUILD   ?= build
SANITIZE ?=
comma := ,
# CUDA: CUDA=1 builds the CUDA backend (kernels/cuda/*.cu, engine/cuda/*.c, ops/bind_cuda.c)
# into the library; CUDA=0 is the CPU-only build, which needs no CUDA header or
# library. The default is auto-detected: CUDA=1 when a usable toolkit is found
# (nvcc of CUDA 11.8 or later, which knows sm_90, with the cuBLAS headers; no
# GPU is needed to build or to run the CPU tests), else CUDA=0. `make test`
# compiles the other variant too, so neither rots: build/cpu (cpu-check) after
# a CUDA build, build/cuda (cuda-check) after a CPU-only build when the toolkit
# is usable. The kernels are built for sm_90 (H100/H200) plus its PTX; set
# CUDA_ARCH for other GPUs (e.g. CUDA_ARCH='-arch=native').
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
NVCC_RELEASE := $(if $(NVCC),$(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1 \2/p'))
CUDA_USABLE := $(and $(NVCC),$(wildcard $(CUDA_HOME)/include/cublas_v2.h),$(shell \
  M=$(word 1,$(NVCC_RELEASE)); m=$(word 2,$(NVCC_RELEASE)); \
  [ -n "$$M" ] && { [ "$$M" -gt 11 ] || { [ "$$M" -eq 11 ] && [ "$$m" -ge 8 ]; }; } && echo yes))
CUDA    ?= $(if $(CUDA_USABLE),1,0)
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
# CUDA=emu builds the same backend and kernels against the host CUDA emulator
# (tests/cuemu/: the .cu files compile as C++, kernels run on the CPU), so the
# GPU parity programs run on machines without a GPU (`make test-cuemu`).
ifneq ($(filter-out 0 1 emu,$(CUDA)),)
  $(error CUDA must be 0, 1 or emu, got '$(CUDA)')
endif
ifeq ($(CUDA),1)
  ifeq ($(NVCC),)
    $(error CUDA=1 but nvcc was not found; set NVCC=/path/to/nvcc)
  endif
endif

BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   := $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter $(WERROR)
# ---- portable build (docs/build.md) ----
# The default build targets a portable baseline, x86-64-v2 (SSE4.2/POPCNT: every x86-64 CPU since
# 2009), so an installed libloom runs on any machine it is copied to. The hot kernels (conv tiles,
# pooling, elementwise, reductions, optimizers) carry AVX2+FMA (x86-64-v3) and AVX-512 (x86-64-v4)
# clones chosen at load time (kernels/cpu/isa.h: GCC target_clones + ifunc; conv.c's own table).
# `make NATIVE=1` compiles everything for the build machine (-march=native), as before.
NATIVE  ?= 0
ifeq ($(NATIVE),1)
  ARCH_FLAGS := -march=native -DLOOM_NATIVE
else ifneq ($(filter x86_64%,$(shell $(CC) -dumpmachine 2>/dev/null)),)
  ARCH_FLAGS := -march=x86-64-v2 -mtune=generic
else
  ARCH_FLAGS :=
endif
OPT     ?= -O2 $(ARCH_FLAGS) -fvect-cost-model=dynamic
# The shared library's ABI version: SONAME libloom.so.$(SOVERSION). Bump it whenever a public
# function's signature or a public struct's layout changes incompatibly (LOOM_VERSION_* in
# include/loom/loom_base.h is the release version; the file is libloom.so.SOVERSION.MINOR.PATCH).
SOVERSION := 1
LOOM_VER  := $(shell sed -n 's/^\#define LOOM_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' include/loom/loom_base.h | paste -sd.)
SO_REAL   := libloom.so.$(SOVERSION).$(word 2,$(subst ., ,$(LOOM_VER))).$(word 3,$(subst ., ,$(LOOM_VER)))
# ---- end portable build ----
CFLAGS  ?=
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) -g -fPIC -fno-math-errno -fvisibility=hidden $(WARN) -MMD -MP \
           -I. -Iinclude $(BLAS_CFLAGS)
LDLIBS  := $(BLAS_LIBS) -lcjson -lprotobuf-c -luv -lcrypto -lpthread -lm -lz
# Quiet build lines ("CC engine/graph.c"); `make V=1` prints the full commands.
ifeq ($(V),1)
  Q :=
  say = @true
else
  Q := @
  say = @printf '  %-6s %s\n' $(1) $(2)
endif
ifneq ($(SANITIZE),)
  CFLAGS  += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -O1
  LDFLAGS += -fsanitize=$(SANITIZE)
  # ifunc resolvers (LOOM_HOT's target_clones) run before TSan's runtime is up and
  # crash the binary at load time: plain functions under TSan.
  ifneq ($(filter thread,$(subst $(comma), ,$(SANITIZE))),)
    CFLAGS += -DLOOM_NO_CLONES
  endif
endif

# The library is every .c under a library folder, found rather than listed: any
# top-level folder (and its subfolders, two levels deep) except the ones below,
# which hold programs, tests and tooling (and any build*/ output folder). A new folder (feature_columns/,
# distributed/, estimator/heads/, ...) joins the build by holding a .c file.
NON_LIB_DIRS := tests bench examples scripts proto tools python build fuzz $(patsubst %/,%,$(wildcard build*/))
LIB_SRC := $(sort $(filter-out $(addsuffix /%,$(NON_LIB_DIRS) $(BUILD)),$(wildcard */*.c */*/*.c */*/*/*.c)))
# distributed/mpi/ is not part of the library: it is the MPI transport plugin (below).
LIB_SRC := $(filter-out distributed/mpi/% distributed/gloo/%,$(LIB_SRC))
# Protocol buffers (tf.Example, Event/Summary, ONNX): proto/*.proto -> $(BUILD)/gen/proto/*.pb-c.[ch] by protoc-c.
PROTO_SRC := $(wildcard proto/*.proto)
PROTO_C   := $(PROTO_SRC:%.proto=$(BUILD)/gen/%.pb-c.c)
PROTO_H   := $(PROTO_C:.c=.h)
PROTO_OBJ := $(PROTO_C:$(BUILD)/gen/%.c=$(BUILD)/gen/%.o)
CFLAGS  += -I$(BUILD)/gen
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(PROTO_OBJ)
# CUDA backend: only in the CUDA=1 and CUDA=emu builds (the device runtime engine/cuda/, the kernel
# bindings ops/bind_cuda.c, plus the .cu kernels).
# The emulator (tests/cuemu) is never part of the library unless CUDA=emu.
ifeq ($(CUDA),1)
  CU_SRC  := $(wildcard kernels/cuda/*.cu)
  LIB_OBJ += $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
  # cuDNN is optional (CUDNN=1: a cuDNN handle per session is created and the library linked); the
  # kernels use im2col + cuBLAS, so the default build does not need it.
  CUDNN   ?= 0
  CFLAGS  += -DLOOM_HAVE_CUDA -I$(CUDA_HOME)/include
  NVFLAGS := -O3 $(CUDA_ARCH) -std=c++17 -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -DLOOM_HAVE_CUDA -I. -Iinclude \
             -MMD -MP
  # cuBLAS is not linked: engine/cuda/cublas_lazy.c opens it on first use (it costs every process ~0.1 s to load)
  # and falls back to $(CUDA_HOME)/lib64 when the loader's path does not have it.
  # The CUDA runtime is linked statically (libcudart_static.a, NVIDIA's redistributable, what nvcc
  # links by default): libloom.so then needs no libcudart.so and no RUNPATH, and the runtime opens
  # the driver (libcuda.so.1) with dlopen on the first CUDA call, so a CPU-only user of a CUDA build
  # loads nothing of CUDA (docs/build.md).
  CFLAGS  += -DLOOM_CUDA_LIBDIR='"$(CUDA_HOME)/lib64"'
  LDLIBS  += -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib -lcudart_static -lrt -ldl -lstdc++
  ifeq ($(CUDNN),1)
    CFLAGS  += -DLOOM_HAVE_CUDNN
    NVFLAGS += -DLOOM_HAVE_CUDNN
    LDLIBS  += -Wl,-rpath,$(CUDA_HOME)/lib -lcudnn
  endif
else ifeq ($(CUDA),emu)
  CU_SRC  := $(wildcard kernels/cuda/*.cu)
  LIB_OBJ += $(CU_SRC:%.cu=$(BUILD)/%.cu.o) $(BUILD)/tests/cuemu/cuemu.o
  CFLAGS  += -DLOOM_HAVE_CUDA -DLOOM_CUEMU -Itests/cuemu
  CUEMU_CXXFLAGS := -std=c++17 $(OPT) -ffp-contract=off -g -fPIC -fno-math-errno -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter -Wno-unused-local-typedefs -Wno-unknown-pragmas \
             -DLOOM_HAVE_CUDA -DLOOM_CUEMU -I. -Iinclude -Itests/cuemu $(BLAS_CFLAGS) -MMD -MP
  ifneq ($(SANITIZE),)
    CUEMU_CXXFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -O1
  endif
  LDLIBS  += -lstdc++
  LIB_OBJ := $(filter-out $(BUILD)/engine/cuda/cublas_lazy.o,$(LIB_OBJ)) # the emulator provides cuBLAS
else
  LIB_OBJ := $(filter-out $(BUILD)/engine/cuda/%.o $(BUILD)/ops/bind_cuda.o,$(LIB_OBJ))
endif
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
EXAMPLE_SRC := $(wildcard examples/*.c)
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)
# The command line (tools/): build/loom, driven by a JSON job file (docs/cli.md).
TOOL_SRC := $(wildcard tools/*.c)
CLI_BIN  := $(BUILD)/loom

.PHONY: test-qemu
.PHONY: test-build test-criterion test-python-chain cuda-check-none
.PHONY: all lib deps test demo bench bench-compare bench-contention asan alloc-fail tsan install uninstall install-check newcomer wheel clean header-check layer-check cuda-check cpu-check test-py test-gpu test-cuemu bench-gpu \
        clang-check doc-test fuzz fuzz-build fuzz-replay fuzz-seeds fuzz-merge soak
all: lib $(CLI_BIN)
lib: $(BUILD)/libloom.a $(BUILD)/libloom.so

# The collective strategy's MPI transport: a plugin libloom opens on first use (distributed/collective.c),
# so that libloom never links MPI. Built with mpicc when Debian's libopenmpi-dev is installed.
MPICC ?= $(shell command -v mpicc 2>/dev/null)
MPI_PLUGIN := $(BUILD)/libloom_mpi.so
.PHONY: mpi
ifneq ($(MPICC),)
mpi: $(MPI_PLUGIN)
lib: $(MPI_PLUGIN)
$(MPI_PLUGIN): $(wildcard distributed/mpi/*.c) distributed/collective_api.h
	@mkdir -p $(dir $@)
	$(call say,MPICC,$@)
	$(Q)$(MPICC) -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -g -fPIC -shared -fvisibility=hidden -Wall -Wextra $(WERROR) \
	  $(filter %.c,$^) -o $@
else
mpi:
	@echo "mpicc not found: install libopenmpi-dev (scripts/deps.sh) to build $(MPI_PLUGIN)"; exit 1
endif

# The collective strategy's transport for a job launched by TF_CONFIG alone (no mpirun / srun): Gloo's
# TCP transport, in a plugin libloom opens on first use (distributed/collective.c), so that libloom never
# links Gloo or a C++ runtime. Built when Debian's libgloo-dev is installed.
GLOO_PLUGIN := $(BUILD)/libloom_gloo.so
HAVE_GLOO ?= $(if $(wildcard /usr/include/gloo/rendezvous/store.h),1)
.PHONY: gloo
ifneq ($(HAVE_GLOO),)
gloo: $(GLOO_PLUGIN)
lib: $(GLOO_PLUGIN)
$(GLOO_PLUGIN): $(wildcard distributed/gloo/*.cc) distributed/collective_api.h
	@mkdir -p $(dir $@)
	$(call say,CXX,$@)
	$(Q)$(CXX) -std=c++17 -O2 -g -fPIC -shared -fvisibility=hidden -Wall -Wextra $(WERROR) \
	  $(filter %.cc,$^) -o $@ -lgloo -lpthread
else
gloo:
	@echo "Gloo not found: install libgloo-dev (scripts/deps.sh) to build $(GLOO_PLUGIN)"; exit 1
endif

deps:
	@bash scripts/deps.sh

# scripts/cc_obj.sh compiles, or copies the same object of the build folder REUSE_FROM (cpu-check,
# cuda-check and test-cuemu name the main build) when it was compiled from the same preprocessed text
# with the same code-generation flags.
REUSE_FROM ?=
$(BUILD)/%.o: %.c | $(PROTO_H)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)bash scripts/cc_obj.sh $@ $< '$(if $(REUSE_FROM),$(REUSE_FROM)/$*.o)' $(CC) $(CFLAGS)

# The objects compiled differently with CUDA=1 / CUDNN=1 (the backend registry and the CUDA
# backend) are rebuilt when a toggle changes in the same build directory.
CUDA_STAMP := $(BUILD)/.cuda-$(CUDA)-cudnn$(CUDNN)
$(CUDA_STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/.cuda-*
	@touch $@
$(BUILD)/engine/backend.o $(BUILD)/engine/cuda/runtime.o $(BUILD)/ops/registry_init.o $(BUILD)/ops/bind_cuda.o: $(CUDA_STAMP)
# Portable build: every object is rebuilt when the code-generation flags change (NATIVE=1 <-> default).
OPT_STAMP := $(BUILD)/.opt-$(shell printf '%s' '$(OPT)' | md5sum | cut -c1-8)
$(OPT_STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/.opt-*
	@touch $@
$(LIB_OBJ): $(OPT_STAMP)

ifeq ($(CUDA),emu)
$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(call say,CXX,$<)
	$(Q)$(CXX) $(CUEMU_CXXFLAGS) -MF $(@:.o=.d) -x c++ -c $< -o $@
$(BUILD)/tests/cuemu/cuemu.o: tests/cuemu/cuemu.cc
	@mkdir -p $(dir $@)
	$(call say,CXX,$<)
	$(Q)$(CXX) $(CUEMU_CXXFLAGS) -c $< -o $@
else
$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(call say,NVCC,$<)
	$(Q)$(NVCC) $(NVFLAGS) -MF $(@:.o=.d) -c $< -o $@
endif

$(BUILD)/gen/proto/%.pb-c.c $(BUILD)/gen/proto/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/gen
	$(call say,PROTOC,$<)
	$(Q)protoc-c --c_out=$(BUILD)/gen $<

# Keep the generated files (they are intermediates of a pattern chain, which
# make would otherwise delete, forcing a regeneration and a full rebuild).
.PRECIOUS: $(BUILD)/gen/proto/%.pb-c.c $(BUILD)/gen/proto/%.pb-c.h

# Generated code: compiled without the project's strict warning set.
$(BUILD)/gen/proto/%.pb-c.o: $(BUILD)/gen/proto/%.pb-c.c
	$(call say,CC,$<)
	$(Q)$(CC) -std=c11 $(OPT) -g -fPIC -fvisibility=hidden -I$(BUILD)/gen -c $< -o $@

# The static library holds one prelinked object, so that a program linking it
# gets every static initializer (ops/ installs the op table into the engine
# from one, like TF's alwayslink op registrations) even when it references
# nothing else in that object's file.
$(BUILD)/loom.o: $(LIB_OBJ)
	$(call say,LD,$@)
	$(Q)$(CC) -r -nostdlib -o $@ $^

$(BUILD)/libloom.a: $(BUILD)/loom.o
	@rm -f $@
	$(call say,AR,$@)
	$(Q)ar rcs $@ $^

# libloom.so.SOVERSION.MINOR.PATCH with SONAME libloom.so.SOVERSION, and the two links to it.
$(BUILD)/$(SO_REAL): $(LIB_OBJ)
	$(call say,LD,$@)
	$(Q)$(CC) -shared -Wl,-soname,libloom.so.$(SOVERSION) -o $@ $^ $(LDFLAGS) $(LDLIBS)
$(BUILD)/libloom.so: $(BUILD)/$(SO_REAL)
	$(Q)ln -sf $(SO_REAL) $(BUILD)/libloom.so.$(SOVERSION)
	$(Q)ln -sf $(SO_REAL) $@

TEST_CFLAGS = $(TEST_INC) $(filter-out -fvisibility=hidden,$(CFLAGS))
# `make tsan` builds the tests against tests/tsan/criterion/criterion.h instead of Criterion.
TEST_INC ?=
CRITERION_LIB ?= -lcriterion
$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(BUILD)/libloom.a
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(TEST_CFLAGS) $< -o $@ $(BUILD)/libloom.a $(LDFLAGS) $(CRITERION_LIB) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(wildcard bench/*.h) $(BUILD)/libloom.a
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(TEST_CFLAGS) $< -o $@ $(BUILD)/libloom.a $(LDFLAGS) $(LDLIBS) -ldl

$(BUILD)/examples/%: examples/%.c $(wildcard examples/*.h) $(BUILD)/libloom.a
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(TEST_CFLAGS) $< -o $@ $(BUILD)/libloom.a $(LDFLAGS) $(LDLIBS) -ldl

$(CLI_BIN): $(TOOL_SRC) $(wildcard tools/*.h) $(BUILD)/libloom.a
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(TEST_CFLAGS) $(TOOL_SRC) -o $@ $(BUILD)/libloom.a $(LDFLAGS) $(LDLIBS)

# The REST server (tools/serve/): build/loom-serve, TF Serving's API (docs/serving.md).
# Its HTTP parser is Debian's llhttp, shipped as C sources by node-llhttp (Debian has no libllhttp-dev).
SERVE_SRC := $(wildcard tools/serve/*.c)
SERVE_BIN := $(BUILD)/loom-serve
LLHTTP_DIR ?= /usr/share/llhttp
LLHTTP_INC ?= /usr/share/include/llhttp
LLHTTP_OBJ := $(BUILD)/llhttp/llhttp.o $(BUILD)/llhttp/api.o $(BUILD)/llhttp/http.o
all: $(SERVE_BIN)
$(BUILD)/llhttp/%.o: $(LLHTTP_DIR)/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) -std=c11 -O2 -g -fPIC -I$(LLHTTP_INC) -c $< -o $@
$(SERVE_BIN): $(SERVE_SRC) $(wildcard tools/serve/*.h) $(LLHTTP_OBJ) $(BUILD)/libloom.a
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(TEST_CFLAGS) -isystem $(LLHTTP_INC) $(SERVE_SRC) $(LLHTTP_OBJ) -o $@ $(BUILD)/libloom.a $(LDFLAGS) $(LDLIBS)
# tests/test_serve.c runs the built server.
$(BUILD)/tests/test_serve: $(SERVE_BIN)
$(BUILD)/tests/test_serve: TEST_CFLAGS += -DLOOM_SERVE_BIN='"$(SERVE_BIN)"'

# tests/test_jobs.c runs distributed jobs of examples/dist_job (and mpirun).
$(BUILD)/tests/test_jobs: $(BUILD)/examples/dist_job
$(BUILD)/tests/test_jobs: TEST_CFLAGS += -DLOOM_DIST_JOB_BIN='"$(BUILD)/examples/dist_job"'

# tests/test_allreduce.c runs examples/allreduce_job (and dist_job's canned wide & deep) under mpirun with the MPI plugin.
$(BUILD)/tests/test_allreduce: $(BUILD)/examples/allreduce_job $(BUILD)/examples/dist_job $(if $(MPICC),$(MPI_PLUGIN))
$(BUILD)/tests/test_allreduce: TEST_CFLAGS += -DLOOM_ALLREDUCE_JOB_BIN='"$(BUILD)/examples/allreduce_job"' \
  -DLOOM_DIST_JOB_BIN='"$(BUILD)/examples/dist_job"' \
  -DLOOM_MPI_PLUGIN_PATH='"$(abspath $(MPI_PLUGIN))"'

# tests/test_allreduce_launch.c runs examples/allreduce_job by scripts/launch_local over the Gloo plugin (and under mpirun).
$(BUILD)/tests/test_allreduce_launch: $(BUILD)/examples/allreduce_job $(if $(HAVE_GLOO),$(GLOO_PLUGIN)) $(if $(MPICC),$(MPI_PLUGIN))
$(BUILD)/tests/test_allreduce_launch: TEST_CFLAGS += -DLOOM_ALLREDUCE_JOB_BIN='"$(BUILD)/examples/allreduce_job"' \
  -DLOOM_GLOO_PLUGIN_PATH='"$(abspath $(GLOO_PLUGIN))"' -DLOOM_MPI_PLUGIN_PATH='"$(abspath $(MPI_PLUGIN))"'

# tests/test_bench_scaling.c runs bench/scaling --collective (dist_job under mpirun; with --net under bench/netjob
# over the Gloo plugin) and the peers' flag checks.
$(BUILD)/tests/test_bench_scaling: $(BUILD)/examples/dist_job $(if $(MPICC),$(MPI_PLUGIN)) $(if $(HAVE_GLOO),$(GLOO_PLUGIN))
$(BUILD)/tests/test_bench_scaling: TEST_CFLAGS += -DLOOM_DIST_JOB_BIN='"$(BUILD)/examples/dist_job"' \
  -DLOOM_MPI_PLUGIN_PATH='"$(abspath $(MPI_PLUGIN))"' -DLOOM_GLOO_PLUGIN_PATH='"$(abspath $(GLOO_PLUGIN))"'

# tests/test_cli.c runs the built command line.
$(BUILD)/tests/test_cli: $(CLI_BIN)
$(BUILD)/tests/test_cli: TEST_CFLAGS += -DLOOM_CLI_BIN='"$(CLI_BIN)"'
$(BUILD)/tests/test_threads: $(CLI_BIN)
$(BUILD)/tests/test_threads: TEST_CFLAGS += -DLOOM_CLI_BIN='"$(CLI_BIN)"'

# Every public header must compile on its own as C99 and C11 and as C++11, all with -pedantic
# -Werror, and include only loom's own headers and a few C library headers.
PUBLIC_HEADERS := $(sort $(wildcard include/loom/*.h))
# The layering (README's layout table): no two object files of distributed/, estimator/, engine/ or
# data/ call each other, directly or through a loop of files (scripts/file_calls.py, by nm); nothing
# under distributed/ includes an estimator header; estimator_impl.h stays out of distributed/ and
# feature_columns/, engine_impl.h out of summary/ and distributed/.
layer-check: lib
	@out=$$(python3 scripts/file_calls.py $(BUILD)/distributed $(BUILD)/estimator $(BUILD)/engine $(BUILD)/data); \
	 if [ -n "$$out" ]; then echo "layer-check: files that call each other:"; echo "$$out"; exit 1; fi; \
	 bad=$$(grep -rln '#include "estimator/' distributed/; grep -rln 'estimator_impl\.h' distributed/ feature_columns/; \
	        grep -rln 'engine_impl\.h' summary/ distributed/); \
	 if [ -n "$$bad" ]; then echo "layer-check: a header from a layer above (or another layer's private header) in:"; echo "$$bad"; exit 1; fi; \
	 echo "layer-check: no file circles in distributed/ estimator/ engine/ data/, no upward includes"

header-check:
	@mkdir -p $(BUILD)/hc
	$(call say,CHECK,public-headers)
	$(Q)for h in $(notdir $(PUBLIC_HEADERS)); do \
	  printf '#include "loom/%s"\nint main(void){return 0;}\n' $$h > $(BUILD)/hc/$$h.c || exit 1; \
	  for std in c99 c11; do \
	    $(CC) -std=$$std -Wall -Wextra -Werror -pedantic -Iinclude -c $(BUILD)/hc/$$h.c -o $(BUILD)/hc/$$h.o \
	      || { echo "header-check: include/loom/$$h does not compile alone as $$std"; exit 1; }; \
	  done; \
	  $(CXX) -x c++ -std=c++11 -Wall -Wextra -Werror -pedantic -Iinclude -c $(BUILD)/hc/$$h.c -o $(BUILD)/hc/$$h.o \
	    || { echo "header-check: include/loom/$$h does not compile alone as C++11"; exit 1; }; \
	  bad=$$(grep -E '^[[:space:]]*#[[:space:]]*include' include/loom/$$h \
	    | grep -vE '#[[:space:]]*include[[:space:]]+("loom[a-z_]*\.h"|<(stddef|stdint|stdbool|stdarg|stdio|stdlib|string|limits|float)\.h>)'); \
	  if [ -n "$$bad" ]; then echo "header-check: include/loom/$$h includes $$bad (allowed: loom's own headers and <stddef.h> <stdint.h> <stdbool.h> <stdarg.h> <stdio.h> <stdlib.h> <string.h> <limits.h> <float.h>)"; exit 1; fi; \
	done

# `make test`: the main build (library, programs, every test program, the header and layering checks),
# then the phases below, two at a time under -j2 (a phase's output is printed whole when it ends:
# --output-sync=recurse), longest first so that the short ones fill the gaps; -k runs every phase
# and the exit status is non-zero when any failed. Each phase is also a target of its own.
# test-python-chain runs test-py, newcomer and doc-test one after the other: they install the Python
# package into the same venv and build it in python/build.
CUDA_CHECK := $(if $(filter 1,$(CUDA)),cpu-check,$(if $(CUDA_USABLE),cuda-check,cuda-check-none))
TEST_PHASES := $(if $(SANITIZE)$(filter emu,$(CUDA)),,test-cuemu) test-criterion \
  $(if $(SANITIZE),,$(if $(filter 1,$(NATIVE)),,$(if $(filter -march=x86-64-v2%,$(ARCH_FLAGS)),test-qemu))) \
  $(if $(SANITIZE),,test-python-chain) $(CUDA_CHECK) clang-check fuzz-replay $(if $(SANITIZE),,install-check)
test: deps
	@$(MAKE) --no-print-directory phase-test-build
	@$(MAKE) --no-print-directory -k --output-sync=recurse $(TEST_PHASES:%=phase-%)
# phase-X: make X, then a line with its wall and CPU seconds (information, not a check)
phase-%:
	@s=$$(date +%s); $(MAKE) --no-print-directory $*; rc=$$?; \
	 f=$$(mktemp); times > $$f; cpu=$$(tail -1 $$f | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($$i, t, "m"); n += t[1] * 60 + t[2] } printf "%.0f", n }'); rm -f $$f; \
	 echo "test: $* took $$(( $$(date +%s) - s )) s ($$cpu s of CPU)"; exit $$rc

test-build: lib $(CLI_BIN) $(SERVE_BIN) $(TEST_BIN) header-check layer-check
	@:
# The Criterion programs (scripts/run_tests.sh).
test-criterion: lib $(TEST_BIN)
	@bash scripts/run_tests.sh $(TEST_BIN)
test-python-chain:
	@rc=0; for t in test-py newcomer doc-test; do $(MAKE) --no-print-directory $$t || rc=1; done; exit $$rc
cuda-check-none:
	@echo "cuda-check: no usable CUDA toolkit (nvcc >= 11.8 with cuBLAS headers), CUDA build not checked"

# The Python package (python/) on $(BUILD)/libloom.so (scripts/test_python.sh): installed into a fresh
# venv and used from outside the tree, then pytest (skipped with a message without python3/PyPI).
test-py: lib
	@MAKE='$(MAKE)' BUILD='$(BUILD)' SOVERSION='$(SOVERSION)' bash scripts/test_python.sh

# The Python package as a wheel that bundles $(BUILD)/libloom.so (python/setup.py):
# $(BUILD)/python/loom-<version>-py3-none-<platform>.whl, built in the "py" venv (scripts/peer_venv.sh).
wheel: lib
	@rm -rf $(BUILD)/python && mkdir -p $(BUILD)/python
	$(Q)py=$$(bash scripts/peer_venv.sh py) && LOOM_BUILD_DIR='$(abspath $(BUILD))' \
	  "$$py" -m pip wheel -q --no-deps --no-build-isolation -w $(BUILD)/python ./python
	@ls $(BUILD)/python/*.whl

# A newcomer's first hour from a temporary prefix and a fresh venv (scripts/newcomer.sh).
newcomer: lib $(CLI_BIN) $(SERVE_BIN)
	@MAKE='$(MAKE)' BUILD='$(BUILD)' SOVERSION='$(SOVERSION)' bash scripts/newcomer.sh

# Installs into a temporary prefix and builds, runs and uninstalls from there (scripts/install_check.sh).
install-check: lib $(CLI_BIN) $(SERVE_BIN)
	@MAKE='$(MAKE)' BUILD='$(BUILD)' SOVERSION='$(SOVERSION)' bash scripts/install_check.sh

# The runnable code blocks of README.md and docs/*.md (the markers: scripts/doc_test.py,
# docs/getting-started.md), after a self-test on a page of broken blocks that must fail.
DOC_TEST_ENV = CC="$(CC)" DOC_LDLIBS="$(LDFLAGS) $(LDLIBS)" LOOM_BUILD="$(abspath $(BUILD))"
doc-test: lib $(CLI_BIN) $(SERVE_BIN)
	@$(DOC_TEST_ENV) python3 scripts/doc_test.py --self-test
	@$(DOC_TEST_ENV) python3 scripts/doc_test.py

# Compiles the CUDA variant of the library into build/cuda (no GPU needed).
cuda-check:
	@$(MAKE) --no-print-directory BUILD=build/cuda CUDA=1 REUSE_FROM=$(BUILD) lib
	@echo "cuda-check: CUDA build compiles"

# Compiles the library with clang (CPU-only, -O0 to keep it cheap, warnings are errors) into
# build/clang, so that the fuzz build (libFuzzer needs clang) does not rot.
CLANG ?= $(shell command -v clang 2>/dev/null || command -v clang-14 2>/dev/null)
clang-check:
	@if [ -z "$(CLANG)" ]; then echo "clang-check: clang not found (scripts/deps.sh installs it)"; exit 1; fi
	@$(MAKE) --no-print-directory BUILD=build/clang CC=$(CLANG) CUDA=0 OPT=-O0 WERROR=-Werror build/clang/libloom.a
	@echo "clang-check: the library compiles with $(notdir $(CLANG)), no warnings"

# Compiles the CPU-only variant into build/cpu: no CUDA header or library on its paths.
cpu-check:
	@$(MAKE) --no-print-directory BUILD=build/cpu CUDA=0 REUSE_FROM=$(BUILD) lib
	@echo "cpu-check: CPU-only build compiles without CUDA"

# GPU vs CPU parity of every op with a CUDA kernel; skips (exit 0) without a GPU.
# (built into build/cuda: objects are not rebuilt when only CUDA changes)
GPU_TEST_SRC := $(wildcard tests/gpu/test_*.c)
test-gpu: deps
	@if [ -z "$(NVCC)" ]; then echo "test-gpu: nvcc not found, skipping"; exit 0; fi; \
	 $(MAKE) --no-print-directory BUILD=build/cuda CUDA=1 lib $(GPU_TEST_SRC:tests/%.c=build/cuda/tests/%) \
	   build/cuda/tests/gpu/parity_coverage && \
	 rm -rf build/cuda/parity_coverage && mkdir -p build/cuda/parity_coverage && \
	 export LOOM_PARITY_COVERAGE_DIR=$(CURDIR)/build/cuda/parity_coverage && \
	 rc=0; for t in $(GPU_TEST_SRC:tests/%.c=build/cuda/tests/%) build/cuda/tests/gpu/parity_coverage; do $$t || rc=1; done; \
	 cs=$(COMPUTE_SANITIZER); \
	 if [ "$(GPU_MEMCHECK)" = 0 ]; then echo "test-gpu: GPU_MEMCHECK=0, compute-sanitizer runs skipped"; \
	 elif [ -z "$$cs" ]; then echo "test-gpu: compute-sanitizer not found, memcheck runs skipped"; \
	 else for t in $(GPU_TEST_SRC:tests/%.c=build/cuda/tests/%); do \
	   api=; case $$t in */test_cuda_errors) api="--report-api-errors no";; esac; \
	   echo "test-gpu: compute-sanitizer --tool memcheck $$api $$t"; \
	   $$cs --tool memcheck --leak-check full --error-exitcode 86 $$api $$t > build/cuda/memcheck_$$(basename $$t).log 2>&1; \
	   m=$$?; tail -1 build/cuda/memcheck_$$(basename $$t).log; [ $$m -eq 0 ] || rc=1; done; fi; \
	 exit $$rc
# ---- compute-sanitizer in test-gpu ----
# Each GPU program runs a second time under compute-sanitizer's memcheck (out-of-bounds and
# misaligned device accesses, device leaks); any report fails test-gpu (logs:
# build/cuda/memcheck_<program>.log). test_cuda_errors runs with --report-api-errors no: its failing
# CUDA calls (a 512 GiB cudaMalloc, device ordinals 4096 and 1 on a one-GPU machine) are the inputs
# it tests, not faults; its kernels' memory accesses are still checked. GPU_MEMCHECK=0 skips.
COMPUTE_SANITIZER ?= $(firstword $(shell command -v compute-sanitizer 2>/dev/null) \
  $(wildcard $(CUDA_HOME)/bin/compute-sanitizer $(CUDA_HOME)/compute-sanitizer/compute-sanitizer))
GPU_MEMCHECK ?= 1
# ---- end compute-sanitizer ----

# The GPU parity programs under the CUDA emulator (no GPU needed; part of `make test`).
# Both runs end with parity_coverage: a CUDA kernel that no test_parity* program ran fails.
# test_nccl: the collective strategy's NCCL path, two ranks under mpirun with the emulated NCCL
# (tests/cuemu/nccl_emu.c), and its fallback to the host all-reduce.
test-cuemu: deps
	@$(MAKE) --no-print-directory BUILD=build/cuemu CUDA=emu REUSE_FROM=$(BUILD) lib build/cuemu/tests/cuemu/test_cuemu \
	  $(GPU_TEST_SRC:tests/%.c=build/cuemu/tests/%) build/cuemu/tests/gpu/parity_coverage \
	  build/cuemu/tests/cuemu/test_nccl build/cuemu/examples/allreduce_job build/cuemu/libnccl_emu.so
	@rm -rf build/cuemu/parity_coverage && mkdir -p build/cuemu/parity_coverage; \
	 export LOOM_PARITY_COVERAGE_DIR=$(CURDIR)/build/cuemu/parity_coverage; \
	 rc=0; for t in build/cuemu/tests/cuemu/test_cuemu $(GPU_TEST_SRC:tests/%.c=build/cuemu/tests/%) \
	   build/cuemu/tests/gpu/parity_coverage build/cuemu/tests/cuemu/test_nccl; do $$t || rc=1; done; \
	 echo "test-cuemu: again with each block's threads run last to first (a race would change results)"; \
	 for t in test_parity test_parity_array test_parity_extra test_cuda_errors; do \
	   CUEMU_ORDER=reverse build/cuemu/tests/gpu/$$t || rc=1; done; \
	 exit $$rc
$(BUILD)/tests/cuemu/test_cuemu: tests/cuemu/test_cuemu.cc $(BUILD)/tests/cuemu/cuemu.o
	@mkdir -p $(dir $@)
	$(call say,CXXLD,$@)
	$(Q)$(CXX) $(CUEMU_CXXFLAGS) $^ -o $@ $(LDFLAGS) $(BLAS_LIBS) -lpthread

# The emulated NCCL, opened in place of libnccl through LOOM_NCCL_LIBRARY (CUDA=emu programs).
$(BUILD)/libnccl_emu.so: tests/cuemu/nccl_emu.c tests/cuemu/nccl.h
	@mkdir -p $(dir $@)
	$(call say,CC,$@)
	$(Q)$(CC) -std=c11 -O2 -g -fPIC -shared -fvisibility=hidden -Wall -Wextra $(WERROR) -Itests/cuemu $< -o $@ -lpthread

$(BUILD)/tests/gpu/%: tests/gpu/%.c tests/gpu/parity.h tests/gpu/parity_coverage.h $(BUILD)/libloom.a
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(TEST_CFLAGS) $< -o $@ $(BUILD)/libloom.a $(LDFLAGS) $(LDLIBS)

# Fuzzing (fuzz/, libFuzzer + ASan + UBSan via clang): `make fuzz FUZZ_SECONDS=N` runs every target
# for N seconds from its corpus fuzz/corpus/<target>/ (new inputs go to build/fuzz/corpus/<target>/);
# `make fuzz-replay` (part of `make test`) runs each target once over its committed corpus, no new inputs.
# FUZZ_RUNS=M also stops each target after M executions; FUZZ_TARGETS='csv idx' runs only those.
FUZZ_SECONDS ?= 60
FUZZ_SRC := $(wildcard fuzz/fuzz_*.c)
FUZZ_NAMES := $(FUZZ_SRC:fuzz/fuzz_%.c=%)
FUZZ_BIN := $(FUZZ_NAMES:%=build/fuzz/fuzz_%)
FUZZ_SAN := address,undefined
fuzz-build:
	@if [ -z "$(CLANG)" ]; then echo "fuzz: clang not found (scripts/deps.sh installs it)"; exit 1; fi
	@$(MAKE) --no-print-directory BUILD=build/fuzz CC=$(CLANG) CUDA=0 OPT='-O1 -gline-tables-only' \
	  SANITIZE=fuzzer-no-link,$(FUZZ_SAN) build/fuzz/libloom.a $(FUZZ_BIN)
build/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_util.h build/fuzz/libloom.a
	$(call say,CCLD,$@)
	$(Q)$(CC) $(filter-out -fvisibility=hidden -fsanitize=%,$(CFLAGS)) -fsanitize=fuzzer,$(FUZZ_SAN) $< -o $@ \
	  build/fuzz/libloom.a $(LDLIBS)
# Regenerates the seed corpora (committed) from test fixtures and files loom writes.
fuzz-seeds: lib fuzz-build
	@mkdir -p $(BUILD)
	$(Q)$(CC) $(TEST_CFLAGS) fuzz/make_seeds.c -o $(BUILD)/make_seeds $(BUILD)/libloom.a $(LDLIBS)
	$(Q)$(BUILD)/make_seeds fuzz/corpus /tmp/loom_fuzz_seeds_$$$$
	$(Q)mkdir -p fuzz/corpus/export fuzz/corpus/graph && LOOM_FUZZ_SEEDS=fuzz/corpus/export build/fuzz/fuzz_export -runs=0 /dev/null >/dev/null 2>&1; \
	  tail -c +2 fuzz/corpus/export/export_1 > fuzz/corpus/graph/saved_model
	$(Q)mkdir -p fuzz/corpus/job && cp examples/jobs/diamonds_wide_deep.json examples/jobs/iris_dnn.json fuzz/corpus/job/ && \
	  sed -e 's/"format": "idx",/"format": "idx", "limit": 64,/' examples/jobs/fashion_mnist_dnn.json > fuzz/corpus/job/fashion_mnist_dnn.json
	@echo "fuzz-seeds: $$(find fuzz/corpus -type f | wc -l) seeds in fuzz/corpus"

build/fuzz/fuzz_job: $(TOOL_SRC) $(wildcard tools/*.h)
# fuzz_rest compiles in tools/serve/serve_json.c and links llhttp (built by this build's compiler)
build/fuzz/fuzz_rest: fuzz/fuzz_rest.c fuzz/fuzz_util.h build/fuzz/libloom.a $(wildcard tools/serve/*) $(LLHTTP_OBJ)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(filter-out -fvisibility=hidden -fsanitize=%,$(CFLAGS)) -isystem $(LLHTTP_INC) -fsanitize=fuzzer,$(FUZZ_SAN) \
	  $< $(LLHTTP_OBJ) -o $@ build/fuzz/libloom.a $(LDLIBS)
# After `make fuzz`: the committed corpora become their inputs plus what the run found, minimized.
fuzz-merge: fuzz-build
	@bash scripts/fuzz.sh merge 0 $(or $(FUZZ_TARGETS),$(FUZZ_NAMES))
fuzz: deps fuzz-build
	@FUZZ_RUNS=$(FUZZ_RUNS) bash scripts/fuzz.sh run $(FUZZ_SECONDS) $(or $(FUZZ_TARGETS),$(FUZZ_NAMES))
# The replay programs: each target + fuzz/driver.c (a main that runs every corpus file once),
# built with this build's compiler and flags against $(BUILD)/libloom.a (no clang needed).
REPLAY_BIN := $(FUZZ_NAMES:%=$(BUILD)/fuzz-replay/fuzz_%)
$(BUILD)/fuzz-replay/fuzz_%: fuzz/fuzz_%.c fuzz/driver.c fuzz/fuzz_util.h $(BUILD)/libloom.a
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(TEST_CFLAGS) fuzz/driver.c $< -o $@ $(BUILD)/libloom.a $(LDFLAGS) $(LDLIBS)
$(BUILD)/fuzz-replay/fuzz_job: $(TOOL_SRC) $(wildcard tools/*.h)
$(BUILD)/fuzz-replay/fuzz_rest: fuzz/fuzz_rest.c fuzz/driver.c fuzz/fuzz_util.h $(BUILD)/libloom.a $(wildcard tools/serve/*) \
  $(LLHTTP_OBJ)
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(TEST_CFLAGS) -isystem $(LLHTTP_INC) fuzz/driver.c $< $(LLHTTP_OBJ) -o $@ $(BUILD)/libloom.a $(LDFLAGS) $(LDLIBS)
fuzz-replay: lib $(REPLAY_BIN)
	@BUILD=$(BUILD) bash scripts/fuzz.sh replay 0 $(FUZZ_NAMES)

# Soak test (tests/soak.c, not part of `make test`): train + evaluate + export + predict in a loop
# for SOAK_SECONDS (default 3600), RSS / open fds / loom's live heap sampled; exit 1 unless flat.
SOAK_SECONDS ?= 3600
$(BUILD)/tests/soak: tests/soak.c $(BUILD)/libloom.a
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(TEST_CFLAGS) $< -o $@ $(BUILD)/libloom.a $(LDFLAGS) $(LDLIBS)
soak: lib $(BUILD)/tests/soak
	SOAK_SECONDS=$(SOAK_SECONDS) $(BUILD)/tests/soak

asan:
	@bash scripts/deps.sh
	@$(MAKE) --no-print-directory BUILD=build/asan CUDA=0 SANITIZE=address,undefined test

# Allocation-failure injection (tests/test_alloc_fail.c) at every point of its
# scenarios, under ASan/LSan; `make test` tries a sample of the points.
alloc-fail:
	@bash scripts/deps.sh
	@$(MAKE) --no-print-directory BUILD=build/asan CUDA=0 SANITIZE=address,undefined lib build/asan/tests/test_alloc_fail
	@LOOM_ALLOC_FAIL=full build/asan/tests/test_alloc_fail --jobs 2

# ThreadSanitizer on the tests that run threads: the session thread pool, prefetching datasets,
# concurrent predictor callers, hooks, the parameter-server threads, crash-safety's processes.
# Reports that are not races in loom are suppressed in scripts/tsan.supp, each with its reason.
TSAN_TESTS := test_engine test_data_pipeline test_data_csv_fast test_export test_estimator test_hooks_stop \
              test_hooks_monitored test_ps test_ps_shm test_train_and_evaluate test_alloc_fail test_crash_safety \
              test_serve test_jobs
# Criterion cannot start under TSan (its boxfort arena fails, Criterion issue #274): these builds
# compile the same test files against tests/tsan/criterion/criterion.h, which runs them in-process.
tsan:
	@bash scripts/deps.sh
	@$(MAKE) --no-print-directory BUILD=build/tsan CUDA=0 SANITIZE=thread TEST_INC=-Itests/tsan CRITERION_LIB= lib \
	  $(TSAN_TESTS:%=build/tsan/tests/%)
	@TSAN_OPTIONS="suppressions=$(CURDIR)/scripts/tsan.supp halt_on_error=1 second_deadlock_stack=1" \
	  bash scripts/run_tests.sh $(TSAN_TESTS:%=build/tsan/tests/%)

# ---- test-qemu (docs/build.md) ----
# A subset of the CPU tests (the kernels that carry per-ISA clones, their gradients, the
# optimizers) on emulated CPUs without AVX (Nehalem: the x86-64-v2 baseline) and without AVX-512
# (Haswell: the x86-64-v3 clones), built against the in-process Criterion shim so that they stay
# inside qemu-x86_64. Part of `make test` for the portable build (about 170-200 s of CPU with the build of the
# 7 programs; the Haswell runs of test_nn and test_reduce are the longest).
QEMU_TESTS ?= test_math test_nn test_reduce test_train test_losses test_autodiff test_random
QEMU_CPUS  ?= Nehalem Haswell
$(BUILD)/qemu/%: tests/%.c $(wildcard tests/*.h) $(BUILD)/libloom.a
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) -Itests/tsan -DLOOM_TEST_EMULATED=1 $(filter-out -fvisibility=hidden,$(CFLAGS)) $< -o $@ $(BUILD)/libloom.a \
	  $(LDFLAGS) $(LDLIBS)
test-qemu: deps
	@$(MAKE) --no-print-directory lib $(QEMU_TESTS:%=$(BUILD)/qemu/%)
	@QEMU_CPUS="$(QEMU_CPUS)" bash scripts/test_qemu.sh $(QEMU_TESTS:%=$(BUILD)/qemu/%)
# ---- end test-qemu ----

bench: lib $(BENCH_BIN)

# GPU benchmarks (needs an NVIDIA GPU): loom vs raw cuBLAS and vs PyTorch on the same GPU.
bench-gpu: deps
	@$(MAKE) --no-print-directory BUILD=build/cuda CUDA=1 lib build/cuda/bench/ops build/cuda/bench/mlp_train \
	  build/cuda/bench/cnn_train
	@BUILD=build/cuda bash scripts/bench_gpu.sh

bench-compare: deps bench
	@bash scripts/bench_compare.sh
# loom vs PyTorch with 0, 1, 2, 4 busy processes; the predictor vs TF's SavedModel under 2.
bench-contention: deps
	@$(MAKE) --no-print-directory lib $(BUILD)/bench/mlp_train $(BUILD)/bench/predict_latency
	@BUILD=$(BUILD) bash bench/contention.sh

demo: deps
	@$(MAKE) --no-print-directory lib $(EXAMPLE_BIN) $(BUILD)/bench/mlp_train
	@bash scripts/demo.sh

# make install PREFIX=... [DESTDIR=...]: headers, libloom.a, libloom.so (SONAME link and dev link),
# loom.pc (the shared library) and loom-static.pc (libloom.a with the system libraries shared),
# the loom and loom-serve programs, and share/loom/install_manifest.txt, which lists every file
# installed (absolute paths under PREFIX, one a line; a reinstall adds to it) and is what
# `make uninstall` removes. PREFIX must be absolute (it is written into loom.pc and the rpath).
# loom.pc carries an rpath to its libdir unless PREFIX is one the loader searches (/usr, and
# /usr/local through ldconfig), so a program linked with it runs without LD_LIBRARY_PATH.
INSTALL_HEADERS := $(notdir $(wildcard include/loom/*.h))
INSTALL_MANIFEST = $(PREFIX)/share/loom/install_manifest.txt
INSTALL_FILES = $(INSTALL_HEADERS:%=$(PREFIX)/include/loom/%) \
  $(addprefix $(PREFIX)/lib/,libloom.a $(SO_REAL) libloom.so.$(SOVERSION) libloom.so \
  pkgconfig/loom.pc pkgconfig/loom-static.pc $(if $(MPICC),libloom_mpi.so) $(if $(HAVE_GLOO),libloom_gloo.so)) $(PREFIX)/bin/loom $(PREFIX)/bin/loom-serve \
  $(INSTALL_MANIFEST)
CHECK_PREFIX = case '$(PREFIX)' in /*) ;; *) echo "$@: PREFIX must be an absolute path, got '$(PREFIX)'" >&2; exit 2;; esac
PC_RPATH = $(if $(filter /usr /usr/local,$(patsubst %/,%,$(PREFIX))),,-Wl$(comma)-rpath$(comma)$${libdir})
PC_SED = -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(LOOM_VER)|' -e 's|@LIBS@|$(LDLIBS)|' -e 's|@RPATH@|$(PC_RPATH)|'

install: lib $(CLI_BIN) $(SERVE_BIN)
	@$(CHECK_PREFIX)
	install -d $(DESTDIR)$(PREFIX)/include/loom $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin \
	  $(DESTDIR)$(PREFIX)/share/loom
	install -m 644 include/loom/*.h $(DESTDIR)$(PREFIX)/include/loom/
	install -m 644 $(BUILD)/libloom.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/$(SO_REAL) $(DESTDIR)$(PREFIX)/lib/
	ln -sf $(SO_REAL) $(DESTDIR)$(PREFIX)/lib/libloom.so.$(SOVERSION)
	ln -sf $(SO_REAL) $(DESTDIR)$(PREFIX)/lib/libloom.so
	sed $(PC_SED) scripts/loom.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/loom.pc
	sed $(PC_SED) scripts/loom-static.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/loom-static.pc
	install -m 755 $(CLI_BIN) $(SERVE_BIN) $(DESTDIR)$(PREFIX)/bin/
	$(if $(MPICC),install -m 755 $(MPI_PLUGIN) $(DESTDIR)$(PREFIX)/lib/)
	$(if $(HAVE_GLOO),install -m 755 $(GLOO_PLUGIN) $(DESTDIR)$(PREFIX)/lib/)
	@{ cat $(DESTDIR)$(INSTALL_MANIFEST) 2>/dev/null; printf '%s\n' $(INSTALL_FILES); } | sort -u \
	  > $(DESTDIR)$(INSTALL_MANIFEST).new && mv $(DESTDIR)$(INSTALL_MANIFEST).new $(DESTDIR)$(INSTALL_MANIFEST)
	@echo "installed into $(DESTDIR)$(PREFIX); the list is in $(DESTDIR)$(INSTALL_MANIFEST)"
	@if [ -z "$(DESTDIR)" ] && command -v ldconfig >/dev/null && [ -w /etc/ld.so.cache ]; then ldconfig; fi

# Removes the files in the manifest (every `make install` with this PREFIX and DESTDIR adds to it),
# then loom's own folders (include/loom, share/loom) when they are left empty.
uninstall:
	@$(CHECK_PREFIX)
	@m='$(DESTDIR)$(INSTALL_MANIFEST)'; \
	 if [ ! -f "$$m" ]; then echo "uninstall: $$m not found: nothing was installed with PREFIX=$(PREFIX)" >&2; exit 1; fi; \
	 while IFS= read -r f; do case $$f in '$(PREFIX)'/*) rm -f "$(DESTDIR)$$f" && echo "  RM     $(DESTDIR)$$f";; \
	   *) echo "uninstall: skipping '$$f': not under $(PREFIX)" >&2;; esac; done < "$$m"; \
	 rm -f "$$m"; \
	 for d in include/loom share/loom; do rmdir "$(DESTDIR)$(PREFIX)/$$d" 2>/dev/null || true; done
	@if [ -z "$(DESTDIR)" ] && command -v ldconfig >/dev/null && [ -w /etc/ld.so.cache ]; then ldconfig; fi

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d)
-include $(TEST_BIN:=.d)

# loom - build, test, bench. See README.md.
CC      ?= cc
CXX     ?= c++
PREFIX  ?= /usr/local
BUILD   ?= build
SANITIZE ?=
# CUDA: auto-detected from nvcc; CUDA=0 forces the CPU-only build.
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA    ?= $(if $(NVCC),1,0)
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90

BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   := $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
OPT     ?= -O2 -march=native -fvect-cost-model=dynamic
CFLAGS  ?=
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) -g -fPIC -fno-math-errno -fvisibility=hidden $(WARN) -MMD -MP \
           -I. -Iinclude $(BLAS_CFLAGS)
LDLIBS  := $(BLAS_LIBS) -lcjson -lprotobuf-c -lpthread -lm -lz
ifneq ($(SANITIZE),)
  CFLAGS  += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -O1
  LDFLAGS += -fsanitize=$(SANITIZE)
endif

LIB_SRC := $(wildcard engine/*.c) $(wildcard ops/*.c) $(wildcard kernels/cpu/*.c) $(wildcard layers/*.c) $(wildcard losses/*.c) $(wildcard metrics/*.c) $(wildcard estimator/*.c)
# Protocol buffers (tf.Example, Event/Summary): proto/*.proto -> $(BUILD)/gen/proto/*.pb-c.[ch] by protoc-c.
PROTO_SRC := $(wildcard proto/*.proto)
PROTO_C   := $(PROTO_SRC:%.proto=$(BUILD)/gen/%.pb-c.c)
PROTO_H   := $(PROTO_C:.c=.h)
PROTO_OBJ := $(PROTO_C:$(BUILD)/gen/%.c=$(BUILD)/gen/%.o)
CFLAGS  += -I$(BUILD)/gen
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(PROTO_OBJ)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
EXAMPLE_SRC := $(wildcard examples/*.c)
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)

.PHONY: all lib deps test demo bench bench-compare asan install clean header-check cuda-check
all: lib
lib: $(BUILD)/libloom.a $(BUILD)/libloom.so

deps:
	@bash scripts/deps.sh

$(BUILD)/%.o: %.c | $(PROTO_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/gen/proto/%.pb-c.c $(BUILD)/gen/proto/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen $<

# Generated code: compiled without the project's strict warning set.
$(BUILD)/gen/proto/%.pb-c.o: $(BUILD)/gen/proto/%.pb-c.c
	$(CC) -std=c11 $(OPT) -g -fPIC -fvisibility=hidden -I$(BUILD)/gen -c $< -o $@

$(BUILD)/libloom.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libloom.so: $(LIB_OBJ)
	$(CC) -shared -o $@ $^ $(LDFLAGS) $(LDLIBS)

TEST_CFLAGS = $(filter-out -fvisibility=hidden,$(CFLAGS))
$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(BUILD)/libloom.a
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(BUILD)/libloom.a $(LDFLAGS) -lcriterion $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(wildcard bench/*.h) $(BUILD)/libloom.a
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(BUILD)/libloom.a $(LDFLAGS) $(LDLIBS) -ldl

$(BUILD)/examples/%: examples/%.c $(BUILD)/libloom.a
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(BUILD)/libloom.a $(LDFLAGS) $(LDLIBS) -ldl

# The public headers must compile as C and as C++ and include nothing else.
header-check:
	@mkdir -p $(BUILD)
	printf '#include "loom/loom.h"\nint main(void){return loom_version()==0;}\n' > $(BUILD)/hc.c
	$(CC) -std=c11 -Wall -Wextra -Werror -pedantic -Iinclude -c $(BUILD)/hc.c -o $(BUILD)/hc_c.o
	$(CXX) -x c++ -std=c++11 -Wall -Wextra -Werror -Iinclude -c $(BUILD)/hc.c -o $(BUILD)/hc_cxx.o

test: deps
	@$(MAKE) --no-print-directory lib $(TEST_BIN) header-check
	@bash scripts/run_tests.sh $(TEST_BIN)

asan:
	@bash scripts/deps.sh
	@$(MAKE) --no-print-directory BUILD=build/asan SANITIZE=address,undefined test

bench: lib $(BENCH_BIN)

bench-compare: deps bench
	@bash scripts/bench_compare.sh

demo: deps
	@$(MAKE) --no-print-directory lib $(EXAMPLE_BIN) $(BUILD)/bench/mlp_train
	@bash scripts/demo.sh

install: lib
	install -d $(DESTDIR)$(PREFIX)/include/loom $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/loom/*.h $(DESTDIR)$(PREFIX)/include/loom/
	install -m 644 $(BUILD)/libloom.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libloom.so $(DESTDIR)$(PREFIX)/lib/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBS@|$(LDLIBS)|' scripts/loom.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/loom.pc

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d)

# bcg - build, test, demo, bench, install.
#
#   make                 libbcg.so, the bcg command and every plugin under build/
#   make REAL=float      single precision (default double); switching rebuilds
#   make CUDA=0          CPU only even when nvcc is found
#   make MPI=0           no data-parallel runs (mpirun) even when MPI is found
#   make deps            install the Debian packages bcg needs (only the missing ones)
#                        and MuJoCo 3 under deps/ (tools/fetch_mujoco.sh)
#   make test            deps + build + every CUnit suite (a few minutes on 2 cores)
#   make test-asan       the same suites under AddressSanitizer + UBSan
#   make test-dims       the capacity-dependent suites in a MAX_DOF=40 MAX_CONTACT=16 build
#   make fuzz            libFuzzer harnesses (tests/fuzz/), each run FUZZ_SECONDS (default 60)
#   make fuzz-ci         the same, about 20 s each (CI); fails on any crash, leak or sanitizer report
#   make demo            deps + build + the main job on configs/demo.ini
#   make bench           the benchmarks (bcg bench)
#   make bench-gpu       build/bench/gpu_bench: CUDA vs CPU stepper rates (bench/device_run.sh)
#   make check-learning  the slow learning checks (not in CI)
#   make install PREFIX=/usr/local   (+ bcg.pc and the plugin SDK: plugins/README.md)
#   make install-built   the same without building (installs what BUILD holds)

REAL ?= double
# capacities (bcg/dims.h): empty for the defaults, 64 dofs and 24 active
# contacts; smaller ones shrink the workspaces and the CUDA stack reservation
MAX_DOF ?=
MAX_CONTACT ?=
BUILD ?= build
PREFIX ?= /usr/local
CC ?= gcc

NVCC ?= $(shell command -v nvcc 2>/dev/null || (test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc))
ifeq ($(strip $(NVCC)),)
CUDA ?= 0
else
CUDA ?= 1
endif

ifeq ($(REAL),float)
REALDEF := -DBCG_REAL_FLOAT
else ifeq ($(REAL),double)
REALDEF :=
else
$(error REAL must be float or double, not '$(REAL)')
endif

DIMSDEF := $(if $(MAX_DOF),-DBCG_MAX_DOF=$(MAX_DOF)) $(if $(MAX_CONTACT),-DBCG_MAX_CONTACT=$(MAX_CONTACT))

HDF5_CFLAGS := $(shell pkg-config --cflags hdf5 2>/dev/null)
HDF5_LIBS := $(shell pkg-config --libs hdf5 2>/dev/null)
ifeq ($(strip $(HDF5_LIBS)),)
HDF5_CFLAGS := -I/usr/include/hdf5/serial
HDF5_LIBS := -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5
endif

# MuJoCo 3 (model compiler, cross-checks, transfer target): C library and
# headers of DeepMind's pinned `mujoco` wheel, unpacked by tools/fetch_mujoco.sh
# into deps/ (make deps, or on the first build); libmujoco.so is copied next to
# libbcg.so so that every rpath that finds libbcg finds it too.
MUJOCO_VERSION := 3.17.0
MUJOCO_DIR ?= deps/mujoco-$(MUJOCO_VERSION)
MUJOCO_HDR := $(MUJOCO_DIR)/include/mujoco/mujoco.h
MUJOCO_SO := libmujoco.so.$(MUJOCO_VERSION)
MUJOCO_LIB := $(BUILD)/$(MUJOCO_SO)

# glibc's vector maths library (x86-64, glibc >= 2.35): the networks' ELU
# through its vector expm1 (core/nn.c); without it, the scalar expm1
# (the probe links a call of its SSE2 expm1: libmvec before 2.35 has no expm1)
HAVE_MVEC := $(shell printf '%s\n' 'typedef double v2d __attribute__((vector_size(16)));' 'v2d _ZGVbN2v_expm1(v2d);' \
  'int main(void) { volatile v2d x = {0.5, 0.5}; x = _ZGVbN2v_expm1(x); return 0; }' | \
  $(CC) -x c - -o /dev/null -lmvec 2>/dev/null && echo 1)
MVEC_LIB := $(if $(HAVE_MVEC),-lmvec)
MVEC_DEF := $(if $(HAVE_MVEC),-DBCG_HAVE_MVEC)
SANITIZE ?=
# -O3: GCC's vectoriser with its full cost model (runtime alias checks), which
# -O2's "very cheap" model refuses: the adjoint's row updates and the PGS loops
# vectorise. No value changes (GCC does not reassociate or contract here):
# training logs of SHAC+BCG, SHAC and PPO runs are bit-identical to -O2's;
# 11% less time per demo iteration (docs/performance.md section 8)
OPT ?= -O3
# -fno-math-errno -fno-trapping-math: the maths functions never set errno and
# floating-point operations are not assumed to trap (bcg enables no traps),
# which lets loops with selects and square roots vectorise; neither changes a
# value (no reassociation, no contraction: -std=c11 keeps -ffp-contract=off)
CFLAGS_BASE := -std=c11 $(OPT) -g -fPIC -fno-math-errno -fno-trapping-math -Wall -Wextra -Wno-unused-parameter -fopenmp \
  -D_GNU_SOURCE $(REALDEF) $(DIMSDEF) $(MVEC_DEF) -Icore/include -Icore -I$(MUJOCO_DIR)/include $(HDF5_CFLAGS) $(SANITIZE)
CFLAGS += $(CFLAGS_BASE)
LDLIBS_CORE := -L$(BUILD) -l:$(MUJOCO_SO) -liniparser $(HDF5_LIBS) -lopenblas $(MVEC_LIB) -ldl -lm -fopenmp $(SANITIZE)

# MPI (data-parallel training: mpirun -np P bcg train, core/dist.c): Open MPI
# or MPICH, found through pkg-config (Debian: libopenmpi-dev, which make deps
# installs); without it bcg refuses to run under a launcher with several processes
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null || pkg-config --cflags mpich 2>/dev/null)
MPI_LIBS := $(shell pkg-config --libs ompi-c 2>/dev/null || pkg-config --libs mpich 2>/dev/null)
ifeq ($(strip $(MPI_LIBS)),)
MPI ?= 0
else
MPI ?= 1
endif
ifeq ($(MPI),1)
CFLAGS += -DBCG_HAVE_MPI $(MPI_CFLAGS)
LDLIBS_CORE += $(MPI_LIBS)
endif

CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
# -fmad=false: no fused multiply-adds the CPU build does not make, so the GPU
# computes what the CPU computes, operation for operation (with contraction,
# soft contact's float VJP differed from the CPU's by 5e-2 against 1.6e-3
# without; no measurable cost: docs/performance.md section 2.1)
NVCCFLAGS := -O2 -std=c++17 -fmad=false -Xcompiler -fPIC -Xcompiler -Wall -Xcompiler -fopenmp $(REALDEF) $(DIMSDEF) -Icore/include -Icore \
  -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
  --expt-relaxed-constexpr -Wno-deprecated-gpu-targets
ifeq ($(CUDA),1)
CFLAGS += -DBCG_HAVE_CUDA
NVCCFLAGS += -DBCG_HAVE_CUDA
LDLIBS_CORE += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublas
# nvcc objects are C++ (exception personality, static-init guards) but are linked by $(CC)
LDLIBS_CORE += -lstdc++
endif

CORE_SRC := $(wildcard core/*.c)
CORE_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(CORE_SRC))
# the bcg command (app/): linked into the executable only, not into libbcg.so
APP_SRC := $(wildcard app/*.c)
APP_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(APP_SRC))
APP_CMD_OBJ := $(filter-out %/main.o,$(APP_OBJ))
CORE_CU := $(wildcard core/cuda/*.cu)
ifeq ($(CUDA),1)
CORE_OBJ += $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(CORE_CU))
endif

PLUGIN_DIRS := contact_models estimators learners tasks
PLUGIN_SRC := $(foreach d,$(PLUGIN_DIRS),$(wildcard $(d)/*.c))
PLUGINS := $(patsubst %.c,$(BUILD)/plugins/%.so,$(notdir $(PLUGIN_SRC)))

TEST_SRC := $(wildcard tests/test_*.c)
TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
TEST_PLUGIN_SRC := $(wildcard tests/plugins/*.c)
TEST_PLUGINS := $(patsubst tests/plugins/%.c,$(BUILD)/tests/plugins/%.so,$(TEST_PLUGIN_SRC))

LIB := $(BUILD)/libbcg.so
BIN := $(BUILD)/bcg
# $ORIGIN/../lib: the installed bcg finds PREFIX/lib/libbcg.so under any PREFIX
RPATH_BIN := -Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/../lib'
RPATH_PLUG := -Wl,-rpath,'$$ORIGIN/..'
RPATH_TEST := -Wl,-rpath,'$$ORIGIN/..'

.PHONY: motions all deps test test-asan test-dims demo bench check-learning install install-built clean cuda-note
# keep the object files of tests (make would delete them as intermediates and relink each time)
.SECONDARY:
all: cuda-note $(LIB) $(BIN) $(PLUGINS) $(BUILD)/bcg_plots.py

cuda-note:
ifeq ($(CUDA),1)
	@:
else
	@echo "bcg: nvcc not found (or CUDA=0): building the CPU backend only"
endif

# Rebuild everything when the precision, CUDA setting or flags change. Done while
# the Makefile is read, before any rule runs: as a rule, the stamp was never
# remade when missing (.SECONDARY below makes every target secondary, so a
# missing stamp did not count as out of date: a REAL=float build folder
# reused for double kept its float objects), and when another rule did remake
# it, its rm -rf ran in the middle of a parallel build.
# Goals that build nothing (install-built installs what BUILD holds, of
# whichever setting) leave the folder alone.
# The stamp names the precision, the CUDA setting and a checksum of the
# compiler and its flags, so that any change of them (CC, OPT=-O3, SANITIZE,
# a new define) rebuilds too.
FLAGS_SUM := $(shell printf '%s' "$(CC) $(CFLAGS) | $(NVCCFLAGS)" | cksum | cut -d' ' -f1)
FLAGS_STAMP := $(BUILD)/.flags-$(REAL)-cuda$(CUDA)-$(FLAGS_SUM)
NOBUILD_GOALS := install-built clean deps cuda-note
ifneq ($(filter-out $(NOBUILD_GOALS),$(or $(MAKECMDGOALS),all)),)
ifeq ($(wildcard $(FLAGS_STAMP)),)
$(shell rm -f $(BUILD)/.flags-*; rm -rf $(BUILD)/obj $(BUILD)/plugins $(BUILD)/tests; mkdir -p $(BUILD) && touch $(FLAGS_STAMP) && printf '%s\n' '$(strip $(DIMSDEF))' > $(BUILD)/.dims)
endif
endif
$(FLAGS_STAMP):
	@mkdir -p $(BUILD)
	@touch $@

$(MUJOCO_HDR) $(MUJOCO_DIR)/lib/$(MUJOCO_SO):
	sh tools/fetch_mujoco.sh $(MUJOCO_DIR)
$(MUJOCO_LIB): $(MUJOCO_DIR)/lib/$(MUJOCO_SO)
	@mkdir -p $(dir $@)
	cp $< $@

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP) | $(MUJOCO_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -MF $@.d -c $< -o $@

# A plugin file X.c is compiled by gcc; with CUDA it is also compiled by nvcc
# as CUDA (-x cu), where its `#ifdef __CUDACC__` part yields the device entry
# points. Both objects go into the same X.so.
$(BUILD)/obj/plugin-cu/%.o: $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -x cu -MMD -MP -MF $@.d -c $(filter %/$*.c,$(PLUGIN_SRC)) -o $@

$(LIB): $(CORE_OBJ) $(MUJOCO_LIB)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(CORE_OBJ) -Wl,-rpath,'$$ORIGIN' $(LDLIBS_CORE)

$(BIN): $(APP_OBJ) $(LIB)
	$(CC) -o $@ $(APP_OBJ) -L$(BUILD) -lbcg $(RPATH_BIN) $(LDLIBS_CORE)

# bcg report --plots runs the script found next to the bcg executable
$(BUILD)/bcg_plots.py: tools/bcg_plots.py
	@mkdir -p $(dir $@)
	install -m 755 $< $@

define plugin_rule
$(BUILD)/plugins/$(basename $(notdir $(1))).so: $(BUILD)/obj/$(basename $(1)).o $(if $(filter 1,$(CUDA)),$(if $(shell grep -l __CUDACC__ $(1)),$(BUILD)/obj/plugin-cu/$(basename $(notdir $(1))).o)) $(LIB)
	@mkdir -p $$(dir $$@)
	$(CC) -shared -o $$@ $$(filter %.o,$$^) -L$(BUILD) -lbcg $$(RPATH_PLUG) $(LDLIBS_CORE)
endef
$(foreach s,$(PLUGIN_SRC),$(eval $(call plugin_rule,$(s))))
# A plugin's nvcc object is rebuilt whenever its gcc object is (which tracks
# the source and every header it includes through -MMD).
$(foreach s,$(PLUGIN_SRC),$(eval $(BUILD)/obj/plugin-cu/$(basename $(notdir $(s))).o: $(BUILD)/obj/$(basename $(s)).o))

$(BUILD)/tests/plugins/%.so: tests/plugins/%.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared -o $@ $< $(TEST_PLUGIN_FLAGS_$*)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(BUILD)/obj/tests/testutil.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(filter %.o,$^) -L$(BUILD) -lbcg $(RPATH_TEST) $(LDLIBS_CORE) -lcunit

# Deliberately broken plugin variants built from one source with defines.
TEST_PLUGIN_FLAGS_bad_precision := $(if $(REALDEF),-UBCG_REAL_FLOAT,-DBCG_REAL_FLOAT)
TEST_PLUGIN_FLAGS_bad_dims := -UBCG_MAX_DOF -DBCG_MAX_DOF=$(shell echo $$(( $(or $(MAX_DOF),64) - 1 )))

tests-build: all $(TESTS) $(TEST_PLUGINS)

# Reference motions shipped in models/motions/ (CSV + PNG strips), made by
# tools/motiongen.c from its keyframe tables with libbcg's kinematics.
$(BUILD)/motiongen: tools/motiongen.c tasks/motion.h $(LIB)
	$(CC) $(CFLAGS) -Wno-override-init -o $@ $< -L$(BUILD) -lbcg $(RPATH_BIN) $(LDLIBS_CORE) -lz

motions: $(BUILD)/motiongen
	@mkdir -p models/motions
	$(BUILD)/motiongen /usr/share/mujoco/model/humanoid/humanoid.xml models/motions

DEBIAN_PACKAGES := libmujoco-samples python3-pip libiniparser-dev libhdf5-dev hdf5-tools \
  libcunit1-dev libopenblas-dev pkg-config valgrind clang libclang-rt-14-dev libomp-dev \
  python3-matplotlib python3-h5py slurm-wlm munge ffmpeg libosmesa6-dev libopenmpi-dev openmpi-bin
deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "bcg: installing Debian packages:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "bcg: run 'make deps' as root (or sudo) to install:$$missing" >&2; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || \
	    { echo "bcg: apt-get install failed for:$$missing" >&2; exit 1; }; \
	fi
	@test -f $(MUJOCO_HDR) -a -f $(MUJOCO_DIR)/lib/$(MUJOCO_SO) || sh tools/fetch_mujoco.sh $(MUJOCO_DIR)

test: deps
ifeq ($(REAL),float)
	@echo "make test: the suites check gradients against central finite differences to 1e-5 .. 1e-10 relative," \
	  "which needs the double build; run 'make test' without REAL=float (docs/testing.md section 1 says how" \
	  "the float build is checked)" >&2; exit 2
endif
	$(MAKE) tests-build
	@BUILD=$(BUILD) sh tests/run.sh $(TESTS)

# the suites that depend on the capacities (bcg/dims.h), in a build with
# smaller ones: models and clips at the limit, the stepper's FD checks, the
# loader's refusal of a plugin built with others, the installed SDK's Cflags
DIMS_TESTS := test_loader test_model test_step test_dyn test_contact_plugins test_sdk
test-dims: deps
	$(MAKE) BUILD=build-dims MAX_DOF=40 MAX_CONTACT=16 OPT=-O1 tests-build
	@BUILD=build-dims sh tests/run.sh $(addprefix build-dims/tests/,$(DIMS_TESTS))

test-asan: deps
	$(MAKE) BUILD=build-asan OPT=-O1 SANITIZE="-fsanitize=address,undefined -fno-omit-frame-pointer" tests-build
	@BCG_ASAN=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  BUILD=build-asan sh tests/run.sh $(patsubst $(BUILD)/%,build-asan/%,$(TESTS))

# make fuzz: libFuzzer harnesses of every reader of outside input (tests/fuzz/,
# docs/testing.md): libbcg, the plugins and the harnesses built by clang with
# -fsanitize=fuzzer,address,undefined into $(FUZZ_BUILD)/, then each harness
# run for FUZZ_SECONDS from its seed corpus tests/fuzz/corpus/<target>/ (new
# inputs go to $(FUZZ_BUILD)/corpus/<target>/, crashes to
# $(FUZZ_BUILD)/artifacts/). make fuzz-ci: the same for FUZZ_CI_SECONDS each.
FUZZ_BUILD ?= build-fuzz
FUZZ_TARGETS := config model motion_csv motion_h5 checkpoint cli
FUZZ_SECONDS ?= 60
FUZZ_CI_SECONDS ?= 20
FUZZ_SAN := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_BINS := $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_TARGETS))
.PHONY: fuzz fuzz-ci fuzz-build fuzz-harnesses
fuzz-build: deps
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang CUDA=0 OPT=-O1 SANITIZE="$(FUZZ_SAN)" all fuzz-harnesses
fuzz-harnesses: $(FUZZ_BINS)
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h tests/fuzz/fuzz_motion.h tests/fuzz/fuzz_h5desc.h tasks/motion.h $(LIB) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/fuzz -Iapp -fsanitize=fuzzer -o $@ $< $(filter $(BUILD)/obj/app/%.o,$^) -L$(BUILD) -lbcg $(RPATH_TEST) $(LDLIBS_CORE)
# the command-line harness calls the commands of app/ (not in libbcg.so)
$(BUILD)/fuzz/fuzz_cli: $(APP_CMD_OBJ)
fuzz: fuzz-build
	@sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)
fuzz-ci: fuzz-build
	@sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_CI_SECONDS) $(FUZZ_TARGETS)

# make demo: train SHAC+BCG to stand on humanoid.xml (configs/demo.ini, about
# 7 min on 2 cores), then evaluate the untrained and the trained policy in
# MuJoCo and bcg (a verdict line with the numbers), draw the trained one into
# RUN/render-mujoco.mp4 (bcg render), then evaluate the shipped policy of
# models/policies/stand_shac_bcg the same way.
demo: deps
	$(MAKE) all
	$(BIN) train configs/demo.ini
	@echo "== the policy trained now, against the untrained one (--curve: every checkpoint on the way) =="
	$(BIN) eval "$$(ls -td runs/demo/*/ | head -n 1)" --compare-initial --curve
	@echo "== what it does: 5 s in MuJoCo, drawn by bcg render (the reference pose as a translucent ghost) =="
	$(BIN) render "$$(ls -td runs/demo/*/ | head -n 1)"
	@echo "== the shipped policy (models/policies/stand_shac_bcg/README.md: how it was made) =="
	$(BIN) eval models/policies/stand_shac_bcg --compare-initial --out -

bench: all
	$(BIN) bench

# The CUDA stepper's benchmark (bench/gpu_bench.c; GPU and CPU rates on
# humanoid.xml; without a GPU only the CPU part runs). bench/device_run.sh
# builds and runs it on the device machine.
.PHONY: bench-gpu
bench-gpu: $(BUILD)/bench/gpu_bench $(BUILD)/bench/nn_bench
$(BUILD)/bench/gpu_bench: bench/gpu_bench.c tests/plugin_defaults.h $(LIB) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< -L$(BUILD) -lbcg $(RPATH_TEST) $(LDLIBS_CORE)
# MLP forward + backward, CPU vs GPU (bench/nn_bench.c: build/bench/nn_bench)
$(BUILD)/bench/nn_bench: bench/nn_bench.c $(LIB) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -L$(BUILD) -lbcg $(RPATH_TEST) $(LDLIBS_CORE)

check-learning: all
	sh tests/check_learning.sh $(BIN)
# the learning checks train on the learners' test task with the exact test estimator
check-learning: $(BUILD)/tests/plugins/learn_task.so $(BUILD)/tests/plugins/test_exact_estimator.so

install: all
	@$(MAKE) --no-print-directory install-built

# Install what $(BUILD) already holds, building nothing (tests/test_sdk.c
# installs the build under test this way, so no flag difference can trigger a
# rebuild): lib, bin, plugins, headers, PREFIX/lib/pkgconfig/bcg.pc (its
# Cflags carry -DBCG_REAL_FLOAT when BUILD is a float build) and the plugin
# SDK (plugins/README.md, template/, example/) in PREFIX/share/bcg/sdk.
BUILT_REALDEF = $(if $(wildcard $(BUILD)/.flags-float-*),-DBCG_REAL_FLOAT)
BUILT_DIMSDEF = $(shell cat $(BUILD)/.dims 2>/dev/null)
BCG_VERSION_STR = $(shell sed -n 's/^\#define BCG_VERSION "\(.*\)"/\1/p' core/include/bcg/version.h)
SDK_SHARE = $(PREFIX)/share/bcg/sdk
install-built:
	@test -f $(LIB) -a -f $(BIN) || { echo "bcg: $(BUILD) holds no build (run make BUILD=$(BUILD) first)" >&2; exit 1; }
	install -d $(PREFIX)/lib $(PREFIX)/bin $(PREFIX)/lib/bcg/plugins $(PREFIX)/include/bcg
	install -m 755 $(LIB) $(MUJOCO_LIB) $(PREFIX)/lib/
	install -m 755 $(BIN) $(PREFIX)/bin/
	install -d $(PREFIX)/share/bcg
	install -m 755 tools/bcg_plots.py $(PREFIX)/share/bcg/
	@# the data directory (bcg_data_dir): the shipped configs and models, which
	@# their relative paths find from any working directory
	cp -R configs models $(PREFIX)/share/bcg/
	$(if $(wildcard $(PLUGINS)),install -m 755 $(wildcard $(PLUGINS)) $(PREFIX)/lib/bcg/plugins/)
	install -m 644 core/include/bcg/*.h $(PREFIX)/include/bcg/
	install -d $(PREFIX)/lib/pkgconfig $(SDK_SHARE)/template $(SDK_SHARE)/example
	install -m 644 plugins/README.md $(SDK_SHARE)/
	install -d $(PREFIX)/share/doc/bcg/docs
	install -m 644 README.md $(PREFIX)/share/doc/bcg/
	install -m 644 docs/*.md $(PREFIX)/share/doc/bcg/docs/
	install -m 644 plugins/template/Makefile plugins/template/*.c $(SDK_SHARE)/template/
	install -m 644 plugins/example/Makefile plugins/example/*.c $(SDK_SHARE)/example/
	printf '%s\n' 'prefix=$(abspath $(PREFIX))' 'exec_prefix=$${prefix}' 'libdir=$${exec_prefix}/lib' \
	  'includedir=$${prefix}/include' 'plugindir=$${libdir}/bcg/plugins' 'sdkdir=$${prefix}/share/bcg/sdk' \
	  'real=$(if $(BUILT_REALDEF),float,double)' '' 'Name: bcg' \
	  'Description: bcg plugin SDK (headers and libbcg of the differentiable rigid-body simulator)' \
	  'Version: $(BCG_VERSION_STR)' 'Cflags: -I$${includedir} $(strip $(BUILT_REALDEF) $(BUILT_DIMSDEF))' 'Libs: -L$${libdir} -lbcg' \
	  > $(PREFIX)/lib/pkgconfig/bcg.pc

clean:
	rm -rf build build-asan build-dims $(FUZZ_BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

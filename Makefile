# Rover: one non-recursive Makefile.
#   make                 build everything into build/ (binaries in build/bin/)
#   make MODE=debug|asan build into build/debug/ or build/asan/
#   make test            check the layers, build, check the names and READMEs, run every test
#                        suite (installs missing packages first, and the web
#                        suites' chromium and npm tools: make web-deps)
#   make check-layers    no #include across a forbidden edge between layers
#   make check-length    no function of master/ or algorithms/ over 100 lines
#   make check-names     every library symbol has its prefix, none defined twice
#   make check-readmes   READMEs list their folder's files and name what exists
#   make asan            the same tests under AddressSanitizer + UBSan
#   make fault           the fault suite (tests/fault/): every scenario, make test runs the short ones
#   make valgrind        rover-brain under valgrind memcheck, every route driven
#   make bench [BENCH=name]  run benchmarks from tests/bench/
#   make fuzz [FUZZ_SECONDS=300]  run each libFuzzer harness (tests/fuzz/) that long
#   make lint            cppcheck + clang-tidy;  make format-check
#   make demo            install, build, run brain, master and two rover-run nodes on the example
#   make demo-stop       stop the demo (master, nodes, brain, PostgreSQL)
# A new daemon: $(eval $(call daemon,NAME)) below.
MODE ?= release
ifeq ($(MODE),release)
B := build
else
B := build/$(MODE)
endif

CC ?= cc
pkg_cflags = $(shell pkg-config --cflags $(1) 2>/dev/null)
pkg_libs = $(shell pkg-config --libs $(1) 2>/dev/null)
# System packages by the layer that uses them.
SYS_CFLAGS := $(call pkg_cflags,libmicrohttpd libcjson libcurl inih yaml-0.1)
SYS_LIBS := $(call pkg_libs,libmicrohttpd libcjson libcurl inih yaml-0.1) -lpthread -lm
# libpq: only pg/ (so only rover-brain and the tests link it).
PG_CFLAGS := $(call pkg_cflags,libpq)
PG_LIBS := $(call pkg_libs,libpq)
GSL_CFLAGS := $(call pkg_cflags,gsl)
GSL_LIBS := $(call pkg_libs,gsl) -lm
CHECK_CFLAGS := $(call pkg_cflags,check)
CHECK_LIBS := $(call pkg_libs,check)

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wformat=2 -Wvla -Wwrite-strings -fno-common
CFLAGS_BASE := -std=gnu11 $(WARN) -MMD -MP -D_GNU_SOURCE
ifeq ($(MODE),release)
CFLAGS_MODE := -O2 -g
else ifeq ($(MODE),debug)
CFLAGS_MODE := -O0 -g3
else ifeq ($(MODE),asan)
CFLAGS_MODE := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
        -fno-sanitize-recover=undefined
LDFLAGS_MODE := -fsanitize=address,undefined
else
$(error MODE must be release, debug or asan)
endif
ALL_CFLAGS := $(CFLAGS_BASE) $(CFLAGS_MODE) $(CFLAGS)
ALL_LDFLAGS := $(LDFLAGS_MODE) $(LDFLAGS)

# Short build lines; V=1 shows the full commands.
ifeq ($(V),1)
Q :=
say = @true
else
Q := @
say = @printf '  %-6s %s\n' $(1) $(2)
endif

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))
# $(call link,LIBS): link $@ from its prerequisites (objects and static
# libraries, in order) and the system libraries LIBS.
define link
@mkdir -p $(dir $@)
$(call say,LINK,$@)
$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(1)
endef

# ---- layers: each folder sees only the headers of the layers below it ----
# A folder's quoted includes are searched in its own folder and in the -iquote
# folders of its INC, nothing else, so a header from a forbidden layer does not
# compile; <...> never finds our headers.  scripts/check-layers.sh checks the
# same rules on the #include lines themselves (make check-layers).
#   algorithms/  itself and GSL
#   common/      itself and the system libraries
#   pg/          itself, common/ and libpq: PostgreSQL (pool, migrations, a
#                private server), for rover-brain and the tests only
#   scaling/     itself, common/, algorithms/: the glue between wire messages
#                and the policy, shared by the daemons that plan
#   <daemon>/    itself, scaling/, common/, algorithms/ (never another daemon,
#                never tests/)
#   tests/       what each suite tests, plus tests/lib
INC_ALG    := -iquote algorithms $(GSL_CFLAGS)
INC_COMMON := -iquote common $(SYS_CFLAGS)
$(B)/obj/algorithms/%.o: INC := $(INC_ALG)
$(B)/obj/common/%.o: INC := $(INC_COMMON)
INC_SCALING := -iquote scaling $(INC_COMMON) $(INC_ALG)
$(B)/obj/scaling/%.o: INC := $(INC_SCALING)
INC_PG     := -iquote pg $(INC_COMMON) $(PG_CFLAGS)
$(B)/obj/pg/%.o: INC := $(INC_PG)

COMMON_SRC := $(wildcard common/*.c)
ALG_SRC    := $(wildcard algorithms/*.c)
LIB_COMMON := $(B)/lib/librover-common.a
LIB_ALG    := $(B)/lib/librover-alg.a
$(LIB_COMMON): $(call obj,$(COMMON_SRC))
$(LIB_ALG): $(call obj,$(ALG_SRC))
SCALING_SRC := $(wildcard scaling/*.c)
LIB_SCALING := $(B)/lib/librover-scaling.a
$(LIB_SCALING): $(call obj,$(SCALING_SRC))
PG_SRC     := $(wildcard pg/*.c)
LIB_PG     := $(B)/lib/librover-pg.a
$(LIB_PG): $(call obj,$(PG_SRC))
# What a daemon links below its own library, in link order.
LIBS_BELOW := $(LIB_SCALING) $(LIB_ALG) $(LIB_COMMON)
TESTLIB_SRC := $(wildcard tests/lib/*.c)
LIB_TEST   := $(B)/lib/librover-testlib.a
$(LIB_TEST): $(call obj,$(TESTLIB_SRC))

# ---- daemons: <name>/*.c -> librover-<name>.a, <name>/main.c -> rover-<name> ----
# $(eval $(call daemon,NAME[,BIN])) is all a new daemon needs in this file: its
# library, its binary (rover-BIN, BIN defaulting to NAME; none until NAME/main.c
# exists), its include path, its unit tests (tests/NAME/check_*.c, linked with
# its library) and its place in lint and the name checks.
# A daemon's extra system libraries go in NAME_LIBS before the call, a layer it
# may use beyond the usual ones in NAME_DEPS (the library) and NAME_INC (its
# include path); BIN (the second argument) names rover-BIN, a third argument
# the whole binary name.
DAEMONS :=
define daemon
DAEMONS += $(1)
$(1)_SRC := $$(filter-out $(1)/main.c,$$(wildcard $(1)/*.c))
LIB_$(1) := $$(B)/lib/librover-$(1).a
$$(LIB_$(1)): $$(call obj,$$($(1)_SRC))
INC_$(1) := -iquote $(1) -iquote scaling -iquote common -iquote algorithms $$(SYS_CFLAGS) \
        $$(GSL_CFLAGS) $$($(1)_INC)
$$(B)/obj/$(1)/%.o: INC := $$(INC_$(1))
BIN_$(1) := $$(if $$(wildcard $(1)/main.c),$$(B)/bin/$$(or $(3),rover-$$(or $(2),$(1))))
BINS += $$(BIN_$(1))
$$(BIN_$(1)): $$(call obj,$(1)/main.c) $$(LIB_$(1)) $$($(1)_DEPS) $$(LIBS_BELOW)
	$$(call link,$$($(1)_LIBS) $$(SYS_LIBS) $$(GSL_LIBS))
TEST_SRC += $$(wildcard tests/$(1)/check_*.c)
$$(B)/obj/tests/$(1)/%.o: INC := $$(INC_$(1)) -iquote tests/lib $$(CHECK_CFLAGS)
$$(B)/tests/$(1)/%: $$(B)/obj/tests/$(1)/%.o $$(LIB_TEST) $$(LIB_$(1)) $$(LIB_PG) $$(LIBS_BELOW)
	$$(call link,$$($(1)_LIBS) $$(PG_LIBS) $$(SYS_LIBS) $$(GSL_LIBS) $$(CHECK_LIBS))
endef

BINS :=
TEST_SRC :=
# The daemons, one line each (rover-master: $(eval $(call daemon,master))).
# rover-brain: the one daemon on PostgreSQL (pg/).
brain_DEPS := $(LIB_PG)
brain_INC := -iquote pg $(PG_CFLAGS)
brain_LIBS := $(PG_LIBS)
$(eval $(call daemon,brain))
master_LIBS := $(call pkg_libs,yaml-0.1)
$(eval $(call daemon,master))
$(eval $(call daemon,agent,run))
$(eval $(call daemon,monitor))
# roverctl: the command-line client (its binary named as people type it).
ctl_LIBS := $(call pkg_libs,yaml-0.1)
$(eval $(call daemon,ctl,,roverctl))
# rover-operator: the ElasticJob controller (Kubernetes).
$(eval $(call daemon,operator))
# rover-gpuinfo: the one program that loads the CUDA runtime (common/gpu.h runs
# it in a child).  Built against libcudart when the toolkit is found at
# CUDA_HOME (only the runtime API; never -lcuda), else it reports no GPU.
CUDA_HOME ?= /usr/local/cuda
HAVE_CUDA := $(if $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),1)
ifeq ($(HAVE_CUDA),1)
CUDA_CFLAGS := -DRV_HAVE_CUDA -isystem $(CUDA_HOME)/include
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart
endif
gpu_LIBS := $(CUDA_LIBS)
$(eval $(call daemon,gpu,gpuinfo))
$(B)/obj/gpu/%.o: INC += $(CUDA_CFLAGS)
DAEMON_LIBS := $(foreach d,$(DAEMONS),$(LIB_$(d)))
# rover-run's warm interpreter and its network check's collective, where the
# binary looks for them (<bin>/../lib/rover/).
WARM_PY := $(B)/lib/rover/rover_warm.py
NETCHECK_PY := $(B)/lib/rover/rover_netcheck.py
$(B)/lib/rover/%.py: agent/%.py
	@mkdir -p $(dir $@)
	$(call say,CP,$@)
	$(Q)cp $< $@
BINS += $(WARM_PY) $(NETCHECK_PY)

# ---- the trainer library: librover-trainer.so for training processes ----
# Loaded by Python (python/rover/, ctypes) and linked by C training loops.
# trainer/ sees only common/.  The shared library needs position-independent
# code, so the common/ sources it uses are compiled a second time with -fPIC
# into $(B)/pic/; it exports only rv_trainer_* (trainer/exports.map).  Tests
# and benchmarks link the static librover-trainer.a (the same sources).
TRAINER_SRC := $(wildcard trainer/*.c)
TRAINER_COMMON := common/master_client.c common/rest_client.c common/http_client.c \
        $(wildcard common/wire*.c) common/json.c common/buf.c common/parse.c common/clock.c \
        common/err.c common/crc32c.c common/ckslot.c
INC_TRAINER := -iquote trainer -iquote common $(SYS_CFLAGS)
$(B)/obj/trainer/%.o: INC := $(INC_TRAINER)
$(B)/pic/trainer/%.o: INC := $(INC_TRAINER)
$(B)/pic/common/%.o: INC := $(INC_COMMON)
LIB_TRAINER := $(B)/lib/librover-trainer.a
$(LIB_TRAINER): $(call obj,$(TRAINER_SRC))
SO_TRAINER := $(B)/lib/librover-trainer.so
$(B)/pic/%.o: %.c $(B)/.flags
	@mkdir -p $(dir $@)
	$(call say,CCPIC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) -fPIC $(INC) -c $< -o $@
$(SO_TRAINER): $(patsubst %.c,$(B)/pic/%.o,$(TRAINER_SRC) $(TRAINER_COMMON)) trainer/exports.map
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -shared -Wl,--version-script=trainer/exports.map -Wl,-z,defs \
	        -o $@ $(filter %.o,$^) $(call pkg_libs,libcurl libcjson) -lpthread -lm
BINS += $(SO_TRAINER) $(LIB_TRAINER)
TEST_SRC += $(wildcard tests/trainer/check_*.c)
$(B)/obj/tests/trainer/%.o: INC = -iquote trainer $(INC_TESTLIB)
$(B)/tests/trainer/%: $(B)/obj/tests/trainer/%.o $(LIB_TEST) $(LIB_TRAINER) $(LIB_PG) $(LIB_COMMON)
	$(call link,$(PG_LIBS) $(SYS_LIBS) $(CHECK_LIBS))

# ---- test code: fixtures, simulator, suites, benchmarks ----
# Production code never sees tests/lib; tests link only the layers they test
# (a suite that needs a daemon at run time finds its binary in ROVER_BIN_DIR).
SIM_SRC    := $(wildcard tests/sim/*.c)
INC_TESTLIB := -iquote tests/lib -iquote pg -iquote common $(SYS_CFLAGS) $(PG_CFLAGS) \
        $(CHECK_CFLAGS)
$(B)/obj/tests/lib/%.o: INC := $(INC_TESTLIB)
$(B)/obj/tests/common/%.o: INC := $(INC_TESTLIB)
$(B)/obj/tests/algorithms/%.o: INC := -iquote tests/lib $(INC_ALG) $(CHECK_CFLAGS)
$(B)/obj/tests/integration/%.o: INC := $(INC_TESTLIB) $(INC_ALG)
$(B)/obj/tests/sim/%.o: INC := -iquote tests/sim $(INC_SCALING)
# Benchmarks may measure a daemon's internals (brain_plan_query times a store
# query), so they see everything: "brain/brain.h" from the top.
$(B)/obj/tests/bench/%.o: INC := -iquote . $(INC_TESTLIB) $(INC_ALG) -iquote scaling \
        $(foreach d,$(DAEMONS),-iquote $(d)) -iquote trainer

$(B)/lib/%.a:
	@mkdir -p $(dir $@)
	@rm -f $@
	$(call say,AR,$@)
	$(Q)$(if $^,ar rcs $@ $^,ar rcs $@)

# Rebuild everything when the flags change.
FLAGS_STAMP := $(B)/.flags
FLAGS_ALL := $(ALL_CFLAGS) $(ALL_LDFLAGS) $(INC_ALG) $(INC_COMMON) $(INC_SCALING) $(INC_PG) \
        $(INC_TESTLIB) \
        $(foreach d,$(DAEMONS),$(INC_$(d)))
$(shell mkdir -p $(B) && echo '$(FLAGS_ALL)' | cmp -s - $(FLAGS_STAMP) || \
        echo '$(FLAGS_ALL)' > $(FLAGS_STAMP))

$(B)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) $(INC) -c $< -o $@

ifneq ($(SIM_SRC),)
BINS += $(B)/bin/rover-sim
$(B)/bin/rover-sim: $(call obj,$(SIM_SRC)) $(LIB_SCALING) $(LIB_ALG) $(LIB_COMMON)
	$(call link,$(SYS_LIBS) $(GSL_LIBS))
endif

# ---- tests: one check binary per tests/<component>/check_<module>.c ----
TEST_SRC += $(wildcard tests/common/check_*.c tests/algorithms/check_*.c \
        tests/integration/check_*.c tests/scaling/check_*.c)
TEST_BINS := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))
# Shell suites (tests/scripts/check_*.sh) print one "ok"/"not ok" line per check.
TEST_SCRIPTS := $(wildcard tests/scripts/check_*.sh)
$(B)/tests/common/%: $(B)/obj/tests/common/%.o $(LIB_TEST) $(LIB_PG) $(LIB_COMMON)
	$(call link,$(PG_LIBS) $(SYS_LIBS) $(CHECK_LIBS))
$(B)/tests/algorithms/%: $(B)/obj/tests/algorithms/%.o $(LIB_TEST) $(LIB_ALG)
	$(call link,$(GSL_LIBS) $(CHECK_LIBS))
$(B)/tests/integration/%: $(B)/obj/tests/integration/%.o $(LIB_TEST) $(LIB_PG) $(LIB_ALG) $(LIB_COMMON)
	$(call link,$(PG_LIBS) $(SYS_LIBS) $(GSL_LIBS) $(CHECK_LIBS))
# scaling/: its suites link the layers below it only.
$(B)/obj/tests/scaling/%.o: INC := $(INC_SCALING) -iquote tests/lib $(CHECK_CFLAGS)
$(B)/tests/scaling/%: $(B)/obj/tests/scaling/%.o $(LIB_TEST) $(LIB_SCALING) $(LIB_ALG) $(LIB_COMMON)
	$(call link,$(SYS_LIBS) $(GSL_LIBS) $(CHECK_LIBS))
# tests/k8s: the Kubernetes stand-in API server (k8s-standin) and its
# kubectl suite.  A test program: it links only librover-common.a.
K8S_SRC := $(wildcard tests/k8s/*.c)
K8S_STANDIN := $(B)/tests/k8s/k8s-standin
$(B)/obj/tests/k8s/%.o: INC := -iquote tests/k8s $(INC_COMMON)
$(K8S_STANDIN): $(call obj,$(K8S_SRC)) $(LIB_COMMON)
	$(call link,$(SYS_LIBS))
BINS += $(K8S_STANDIN)
TEST_SCRIPTS += $(wildcard tests/k8s/check_*.sh)
# tests/fault/: the whole stack under faults (tests/fault/README.md).  make
# test runs each suite's short scenarios; make fault all of them.
FAULT_SRC := $(wildcard tests/fault/check_*.c)
FAULT_BINS := $(patsubst tests/%.c,$(B)/tests/%,$(FAULT_SRC))
TEST_BINS += $(FAULT_BINS)
$(B)/obj/tests/fault/%.o: INC := $(INC_TESTLIB) $(INC_ALG)
$(B)/tests/fault/%: $(B)/obj/tests/fault/%.o $(LIB_TEST) $(LIB_PG) $(LIB_ALG) $(LIB_COMMON)
	$(call link,$(PG_LIBS) $(SYS_LIBS) $(GSL_LIBS) $(CHECK_LIBS))
# Suites start the daemons' binaries (and rover-sim): build those first.
$(TEST_BINS): | $(BINS)

# ---- benchmarks: tests/bench/<name>.c or tests/bench/<name>.sh ----
BENCH_C := $(wildcard tests/bench/*.c)
BENCH_BINS := $(patsubst tests/bench/%.c,$(B)/bench/%,$(BENCH_C))
$(B)/bench/%: $(B)/obj/tests/bench/%.o $(LIB_TEST) $(DAEMON_LIBS) $(LIB_TRAINER) $(LIB_PG) \
        $(LIBS_BELOW)
	$(call link,$(PG_LIBS) $(SYS_LIBS) $(GSL_LIBS) $(CHECK_LIBS))

# ---- fuzzing: libFuzzer harnesses tests/fuzz/fuzz_<name>.c (clang) ----
# Each is built with clang -fsanitize=fuzzer,address,undefined together with
# the common/ sources it exercises into build/fuzz/ (whatever MODE), and
# runs from its seeds in tests/fuzz/corpus/<name>/ (never written to).
# make fuzz: FUZZ_SECONDS per harness; make test: 30 s for all of them
# (tests/scripts/check_fuzz.sh).
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 300
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,build/fuzz/%,$(FUZZ_SRC))
FUZZ_COMMON := common/json.c $(wildcard common/wire*.c) common/buf.c common/parse.c common/clock.c common/err.c
FUZZ_CFLAGS := -std=gnu11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -Wall -Wextra -Werror -iquote common $(call pkg_cflags,libcjson)
build/fuzz/%: tests/fuzz/%.c $(FUZZ_COMMON) $(wildcard common/*.h)
	@mkdir -p $(dir $@)
	$(call say,FUZZCC,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_COMMON) $(call pkg_libs,libcjson) -lm
fuzz-build: $(FUZZ_BINS)
fuzz: deps fuzz-build
	@FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh $(FUZZ_BINS)

.DEFAULT_GOAL := all
all: $(BINS) $(TEST_BINS) $(BENCH_BINS)

deps:
	@scripts/install-deps.sh

# What only the status page's and the OpenAPI documents' suites need:
# Debian's chromium and nodejs, and the npm tools pinned in tests/web/.
# Without them make test goes on and those suites skip, saying so.
web-deps:
	@scripts/install-deps.sh --web || \
	        echo "warning: chromium/nodejs not installed: the web suites will skip" >&2
	@scripts/install-web-tools.sh || \
	        echo "warning: npm tools not installed: the web and OpenAPI suites will skip" >&2

NPROC := $(shell nproc 2>/dev/null || echo 2)

# check-layers first: a forbidden include is named before it fails to compile.
test: deps web-deps
	@$(MAKE) --no-print-directory check-layers
	@$(MAKE) --no-print-directory check-length
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@$(MAKE) --no-print-directory check-names
	@$(MAKE) --no-print-directory check-readmes
	@B=$(B) MODE=$(MODE) tests/run.sh $(TEST_SCRIPTS) $(TEST_BINS)

# Every #include across a forbidden edge, with file and line (no build needed).
check-layers:
	@ROVER_DAEMONS='$(DAEMONS)' scripts/check-layers.sh

# Every function of master/ and algorithms/ a reader can hold in mind: at
# most 100 lines, but those scripts/check-length.sh lists (no build needed).
check-length:
	@scripts/check-length.sh

# Every global symbol of each library carries its prefix (rv_ for the shared
# libraries, rv_scaling_ for scaling/, the file's or the daemon's name inside a
# daemon) and no two libraries define the same symbol.
check-names: $(LIB_COMMON) $(LIB_ALG) $(LIB_SCALING) $(LIB_PG) $(LIB_TEST) $(DAEMON_LIBS) \
        $(LIB_TRAINER)
	@ROVER_DAEMONS='$(DAEMONS)' scripts/check-names.sh $^

# Every source file in its folder's README file list, every name a README
# gives in backticks somewhere in the code (scripts/check-readmes.sh).
check-readmes:
	@scripts/check-readmes.sh

fault: deps
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@B=$(B) MODE=$(MODE) ROVER_FAULT_ALL=1 tests/run.sh $(FAULT_BINS)

asan:
	@$(MAKE) --no-print-directory MODE=asan test

valgrind: deps
	@$(MAKE) --no-print-directory MODE=release all
	@tests/valgrind.sh

bench: deps
	@$(MAKE) --no-print-directory MODE=release all
	@tests/bench/run.sh $(BENCH)

demo: deps
	@$(MAKE) --no-print-directory MODE=release all
	@scripts/demo.sh

demo-stop:
	@scripts/demo.sh stop

# lint: cppcheck, then clang-tidy with .clang-tidy, each folder with its own
# include path (two processes at a time).
LINT_DIRS := common algorithms scaling pg $(DAEMONS) trainer
INC_algorithms := $(INC_ALG)
INC_common := $(INC_COMMON)
INC_scaling := $(INC_SCALING)
INC_pg := $(INC_PG)
INC_trainer := $(INC_TRAINER)
lint: lint-deps
	@echo "lint: cppcheck"
	@cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	        --inline-suppr --suppress=missingIncludeSystem --suppressions-list=.cppcheck-suppressions \
	        -I common -I algorithms -I scaling -I pg $(foreach d,$(LINT_DIRS),$(wildcard $(d)/*.c))
	@$(foreach d,$(LINT_DIRS),echo "lint: clang-tidy $(d)/" && printf '%s\n' $(wildcard $(d)/*.c) | \
	        xargs -r -P 2 -n 4 sh -c 'clang-tidy --quiet "$$@" -- \
	        $(filter-out -MMD -MP,$(CFLAGS_BASE)) $(INC_$(d)) 2>/dev/null' sh &&) true

# format-check: clang-format on the lines changed since FORMAT_BASE.  The
# existing code predates .clang-format and is not reformatted wholesale.  On a
# branch the base is its merge base with main; on main itself (as in CI, which
# checks out main) it is the previous commit, so the last commit's lines are
# checked.  FORMAT_BASE=<commit> compares with another.
FORMAT_BASE ?= $(shell scripts/format-base.sh)
format-check: lint-deps
	@base='$(FORMAT_BASE)'; \
	[ -n "$$base" ] || { echo "format-check: no base commit to compare with (a shallow clone?); set FORMAT_BASE" >&2; exit 1; }; \
	out=$$(git clang-format --diff --extensions c,h $$base 2>&1); \
	case "$$out" in \
	*"did not modify"*|*"no modified files"*) \
		echo "format-check: lines changed since $$(git rev-parse --short $$base) are formatted";; \
	*) echo "$$out"; echo "format-check: run git clang-format $$base"; exit 1;; \
	esac

lint-deps:
	@scripts/install-deps.sh --lint

# ---- install: where each binary looks beside itself (rv_proc_exe_relative) ----
#   $(PREFIX)/bin/rover-*                      the daemons and rover-run
#   $(PREFIX)/lib/librover-trainer.so          ROVER_TRAINER_LIB for the workers
#   $(PREFIX)/lib/python/rover/                the Python package (on the workers' PYTHONPATH)
#   $(PREFIX)/lib/rover/rover_warm.py          rover-run's warm interpreter
#   $(PREFIX)/lib/rover/rover_netcheck.py      rover-run's network check
#   $(PREFIX)/include/rover/rover_trainer.h    with err.h, which it includes
#   $(PREFIX)/share/rover/sql/                 rover-brain's migrations
#   $(SYSCONFDIR)/rover/*.conf                 every daemon's keys with their defaults
PREFIX ?= /usr/local
SYSCONFDIR ?= $(PREFIX)/etc
INSTALL ?= install
install: $(BINS)
	$(INSTALL) -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/python/rover \
	        $(DESTDIR)$(PREFIX)/lib/rover $(DESTDIR)$(PREFIX)/include/rover \
	        $(DESTDIR)$(PREFIX)/share/rover/sql $(DESTDIR)$(SYSCONFDIR)/rover
	$(INSTALL) -m 755 $(filter $(B)/bin/%,$(BINS)) $(DESTDIR)$(PREFIX)/bin/
	$(INSTALL) -m 755 $(SO_TRAINER) $(DESTDIR)$(PREFIX)/lib/
	$(INSTALL) -m 644 python/rover/*.py $(DESTDIR)$(PREFIX)/lib/python/rover/
	$(INSTALL) -m 644 $(WARM_PY) $(NETCHECK_PY) $(DESTDIR)$(PREFIX)/lib/rover/
	$(INSTALL) -m 644 trainer/rover_trainer.h common/err.h $(DESTDIR)$(PREFIX)/include/rover/
	$(INSTALL) -m 644 sql/*.sql $(DESTDIR)$(PREFIX)/share/rover/sql/
	$(INSTALL) -m 644 conf/*.conf $(DESTDIR)$(SYSCONFDIR)/rover/

clean:
	rm -rf build

.PHONY: fuzz fuzz-build
.PHONY: all deps web-deps test fault check-layers check-length check-names check-readmes asan valgrind bench demo demo-stop lint install \
        lint-deps format-check clean
.SECONDARY:
-include $(shell find $(B)/obj $(B)/pic -name '*.d' 2>/dev/null)

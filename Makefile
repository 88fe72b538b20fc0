# Rover: one non-recursive Makefile.
#   make                 build everything into build/ (binaries in build/bin/)
#   make MODE=debug|asan build into build/debug/ or build/asan/
#   make test            build and run every test suite (installs missing packages first)
#   make asan            the same tests under AddressSanitizer + UBSan
#   make valgrind        rover-brain under valgrind memcheck, every route driven
#   make bench [BENCH=name]  run benchmarks from tests/bench/
#   make lint            cppcheck + clang-tidy;  make format-check
#   make demo            install, build, start the brain, register the example job
MODE ?= release
ifeq ($(MODE),release)
B := build
else
B := build/$(MODE)
endif

CC ?= cc
PKGS := libmicrohttpd libpq libcjson gsl libcurl check inih
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs libmicrohttpd libpq libcjson libcurl inih 2>/dev/null)
GSL_LIBS := $(shell pkg-config --libs gsl 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wformat=2 -Wvla -Wwrite-strings -fno-common
CFLAGS_BASE := -std=gnu11 $(WARN) -MMD -MP -I. -Icommon -Ialgorithms -Itests/lib $(PKG_CFLAGS) \
        -D_GNU_SOURCE
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
LIBS := $(PKG_LIBS) $(GSL_LIBS) -lpthread -lm

# Short build lines; V=1 shows the full commands.
ifeq ($(V),1)
Q :=
say = @true
else
Q := @
say = @printf '  %-6s %s\n' $(1) $(2)
endif

# Rebuild everything when the flags change.
FLAGS_STAMP := $(B)/.flags
$(shell mkdir -p $(B) && echo '$(ALL_CFLAGS) $(ALL_LDFLAGS)' | cmp -s - $(FLAGS_STAMP) || \
        echo '$(ALL_CFLAGS) $(ALL_LDFLAGS)' > $(FLAGS_STAMP))

# ---- libraries: each component is a static library plus main.o ----
COMMON_SRC := $(wildcard common/*.c)
ALG_SRC    := $(wildcard algorithms/*.c)
BRAIN_SRC  := $(filter-out brain/main.c,$(wildcard brain/*.c))
TESTLIB_SRC := $(wildcard tests/lib/*.c)
SIM_SRC    := $(wildcard tests/sim/*.c)

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

LIB_COMMON := $(B)/lib/librover-common.a
LIB_ALG    := $(B)/lib/librover-alg.a
LIB_BRAIN  := $(B)/lib/librover-brain.a
LIB_TEST   := $(B)/lib/librover-testlib.a

$(LIB_COMMON): $(call obj,$(COMMON_SRC))
$(LIB_ALG): $(call obj,$(ALG_SRC))
$(LIB_BRAIN): $(call obj,$(BRAIN_SRC))
$(LIB_TEST): $(call obj,$(TESTLIB_SRC))
$(B)/lib/%.a:
	@mkdir -p $(dir $@)
	@rm -f $@
	$(call say,AR,$@)
	$(Q)$(if $^,ar rcs $@ $^,ar rcs $@)

$(B)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

# ---- binaries ----
BINS := $(B)/bin/rover-brain
$(B)/bin/rover-brain: $(call obj,brain/main.c) $(LIB_BRAIN) $(LIB_ALG) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

ifneq ($(SIM_SRC),)
BINS += $(B)/bin/rover-sim
$(B)/bin/rover-sim: $(call obj,$(SIM_SRC)) $(LIB_ALG) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)
endif

# ---- tests: one check binary per tests/<component>/check_<module>.c ----
TEST_SRC := $(wildcard tests/common/check_*.c tests/algorithms/check_*.c \
        tests/brain/check_*.c tests/integration/check_*.c)
TEST_BINS := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))
$(B)/tests/%: $(B)/obj/tests/%.o $(LIB_TEST) $(LIB_BRAIN) $(LIB_ALG) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS) $(CHECK_LIBS)

# ---- benchmarks: tests/bench/<name>.c or tests/bench/<name>.sh ----
BENCH_C := $(wildcard tests/bench/*.c)
BENCH_BINS := $(patsubst tests/bench/%.c,$(B)/bench/%,$(BENCH_C))
$(B)/bench/%: $(B)/obj/tests/bench/%.o $(LIB_TEST) $(LIB_BRAIN) $(LIB_ALG) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

.DEFAULT_GOAL := all
all: $(BINS) $(TEST_BINS) $(BENCH_BINS)

deps:
	@scripts/install-deps.sh

NPROC := $(shell nproc 2>/dev/null || echo 2)

test: deps
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@B=$(B) MODE=$(MODE) tests/run.sh $(TEST_BINS)

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

LINT_SRC := $(COMMON_SRC) $(ALG_SRC) $(BRAIN_SRC) brain/main.c
# lint: cppcheck, then clang-tidy with .clang-tidy (two files at a time).
lint: lint-deps
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	        --inline-suppr --suppress=missingIncludeSystem --suppressions-list=.cppcheck-suppressions -I common -I algorithms $(LINT_SRC)
	printf '%s\n' $(LINT_SRC) | xargs -P 2 -n 4 sh -c \
	        'clang-tidy --quiet "$$@" -- $(filter-out -MMD -MP,$(CFLAGS_BASE)) 2>/dev/null' sh

# format-check: clang-format on the lines changed since the merge base with
# main (FORMAT_BASE=<commit> to compare with another); the existing code
# predates .clang-format and is not reformatted wholesale.
FORMAT_BASE ?= $(shell git merge-base HEAD origin/main 2>/dev/null || \
        git merge-base HEAD main 2>/dev/null || echo HEAD)
format-check: lint-deps
	@out=$$(git clang-format --diff --extensions c,h $(FORMAT_BASE) 2>&1); \
	case "$$out" in \
	*"did not modify"*|*"no modified files"*) \
		echo "format-check: lines changed since $(FORMAT_BASE) are formatted";; \
	*) echo "$$out"; echo "format-check: run git clang-format $(FORMAT_BASE)"; exit 1;; \
	esac

lint-deps:
	@scripts/install-deps.sh --lint

clean:
	rm -rf build

.PHONY: all deps test asan valgrind bench demo lint lint-deps format-check clean
.SECONDARY:
-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)

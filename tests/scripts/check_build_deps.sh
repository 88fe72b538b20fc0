#!/usr/bin/env bash
# Suite for the Makefile's header dependencies: a changed header rebuilds
# every object that includes it, in each tree of objects (obj/ for the
# static libraries, pic/ for librover-trainer.so).  make -n -W pretends the
# header changed: nothing is built or touched.  Needs a built tree ($B).
# Prints one "ok"/"not ok" line per check and exits 1 if any failed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
B=${B:-build}
failed=0

# expect_rebuild NAME HEADER TARGET OBJECT: make TARGET recompiles OBJECT
# when HEADER changed.
expect_rebuild() {
	if make -n -W "$2" "$3" 2>/dev/null | grep -q -- "-o $4\$"; then
		echo "ok - $1"
	else
		echo "not ok - $1: $4 is not rebuilt for $3 after $2 changed"
		failed=1
	fi
}

[ -f "$B/lib/librover-trainer.so" ] || { echo "not ok - no $B/lib/librover-trainer.so: build first"; exit 1; }
expect_rebuild "trainer.h rebuilds the static library's trainer.o" trainer/trainer.h \
	"$B/lib/librover-trainer.a" "$B/obj/trainer/trainer.o"
expect_rebuild "trainer.h rebuilds the shared library's trainer.o" trainer/trainer.h \
	"$B/lib/librover-trainer.so" "$B/pic/trainer/trainer.o"
expect_rebuild "ckslot.h rebuilds the shared library's common/ckslot.o" common/ckslot.h \
	"$B/lib/librover-trainer.so" "$B/pic/common/ckslot.o"
exit $failed

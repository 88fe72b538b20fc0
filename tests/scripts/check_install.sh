#!/usr/bin/env bash
# Suite for make install: into a temporary DESTDIR with PREFIX=/usr, every
# piece lands where the binaries look for it; the installed rover package
# imports from there and finds the installed librover-trainer.so with no
# variable set; a C program builds against the installed header and library;
# and the installed rover-run runs a Python worker that reaches both.
# Prints one "ok"/"not ok" line per check and exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${B:-build}
failed=0
check() { # description, command...
	local what=$1
	shift
	if out=$("$@" 2>&1); then echo "ok - $what"; else
		echo "not ok - $what"
		printf '%s\n' "$out" | tail -15 | sed 's/^/    /'
		failed=1
	fi
}
# the asan build's library needs its runtime first in a program that is not
# built with it (Python), and -fsanitize in one that links it
san=() cflags=()
if [ "${MODE:-release}" = asan ]; then
	san=(LD_PRELOAD="$(${CC:-cc} -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0)
	cflags=(-fsanitize=address,undefined)
fi
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
check "make install into DESTDIR" make --no-print-directory -s MODE="${MODE:-release}" install \
	DESTDIR="$dest" PREFIX=/usr
p=$dest/usr
for f in bin/rover-run bin/rover-master bin/rover-brain lib/librover-trainer.so \
	lib/python/rover/__init__.py lib/rover/rover_warm.py include/rover/rover_trainer.h \
	include/rover/err.h etc/rover/rover-master.conf etc/rover/rover-brain.conf; do
	check "installed $f" test -e "$p/$f"
done
check "installed sql migrations" sh -c "ls '$p/share/rover/sql/'*.sql >/dev/null"
check "the installed package imports and finds its library" env -u ROVER_TRAINER_LIB \
	"${san[@]}" PYTHONPATH="$p/lib/python" /usr/bin/python3 -c "
import rover, sys
assert rover.__file__.startswith('$p/'), rover.__file__
lib = rover._load()
assert lib._name.startswith('$p/'), lib._name
t = rover.Trainer(master=None, job='install-check-$$', rank=0, world_size=1)
print(t.rank, t.world_size)
"
cat >"$dest/loop.c" <<'CEOF'
#include <stdio.h>
#include "rover/rover_trainer.h"
int main(void)
{
	struct rv_err err;
	struct rv_trainer_opts o = { .job = "install-c", .rank = 0, .world_size = 1 };
	struct rv_trainer *t = rv_trainer_open_opts(&o, &err);
	if (!t)
		return 1;
	printf("%u\n", rv_trainer_crc32c(0, "123456789", 9));
	rv_trainer_close(t);
	return 0;
}
CEOF
check "a C loop builds against the installed header and library" \
	cc "${cflags[@]}" -o "$dest/loop" -I"$p/include" "$dest/loop.c" -L"$p/lib" -lrover-trainer \
	-Wl,-rpath,"$p/lib"
check "the C loop runs (CRC32C of 123456789 is e3069283)" \
	sh -c "[ \"\$('$dest/loop')\" = $((0xe3069283)) ]"
cat >"$dest/w.py" <<'PEOF'
import os, rover
lib = rover._load()
print("pkg=%s lib=%s" % (rover.__file__, lib._name), flush=True)
PEOF
check "the installed rover-run gives its workers the installed package and library" sh -c "
	out=\$(env -u ROVER_TRAINER_LIB -u PYTHONPATH ${san[*]} PYTHON_EXEC=/usr/bin/python3 ROVER_WARM=0 \
		'$p/bin/rover-run' --standalone --nproc-per-node 1 '$dest/w.py' 2>&1) || { echo \"\$out\"; exit 1; }
	echo \"\$out\" | grep -q 'pkg=$p/lib/python/rover/__init__.py lib=$p/lib/librover-trainer.so' ||
		{ echo \"\$out\"; exit 1; }"
exit $failed

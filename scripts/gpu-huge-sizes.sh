#!/bin/sh
# gpu-huge-sizes.sh - requests near SIZE_MAX through libcmb_pluggable over
# the real upstreams: under each policy (cuda, bfc, torch-caching, rmm-pool,
# arena, binning, cupy, buddy over @cuda; cmb and torch-expandable over
# @vmm) a malloc of SIZE_MAX, SIZE_MAX - 100, 2^63 and 256TiB + 1 must
# return NULL with the reason ("larger than 256TiB"), leave the library's
# requested bytes as they were, and the next allocation must still work.
# (Before common/cmb_size.h, a program passing a huge size over @cuda got a
# pointer.) Each policy runs in a process of its own: the library reads its
# configuration once per process.
#
#   scripts/gpu-huge-sizes.sh BUILD_DIR OUT_DIR
#
# OUT_DIR/huge-sizes.txt holds a line per policy; exit status 0 when every
# policy refused every size. CMB_HUGE_UPSTREAM=sim runs the same over the
# sim upstream (no GPU; for the script's own test).
set -u

. "$(dirname "$0")/lib.sh"
cmb_dirs "" "$@"
lib="$build/pluggable/libcmb_pluggable.so"
[ -f "$lib" ] || { echo "$0: $lib is missing: build first (make build)" >&2; exit 2; }
up=${CMB_HUGE_UPSTREAM:-}
[ "$up" = sim ] && export CMB_PLUGGABLE_ALLOW_SIM=1

report="$out/huge-sizes.txt"
: >"$report"
status=0
for spec in cuda@cuda bfc@cuda torch-caching@cuda rmm-pool@cuda arena@cuda binning@cuda cupy@cuda buddy@cuda \
            cmb@vmm torch-expandable@vmm; do
    [ -n "$up" ] && spec="${spec%@*}@$up"
    python3 - "$lib" "$spec" >>"$report" 2>>"$out/stderr.txt" <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
spec = sys.argv[2]
lib.cmb_pluggable_malloc.restype = ctypes.c_void_p
lib.cmb_pluggable_malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
lib.cmb_pluggable_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
lib.cmb_pluggable_last_error.restype = ctypes.c_char_p
if lib.cmb_pluggable_configure(spec.encode()) != 0:
    print(f"{spec}: skipped: {lib.cmb_pluggable_last_error().decode()}")
    sys.exit(0)
MiB = 1 << 20
live = lib.cmb_pluggable_malloc(MiB, 0, None)
if not live:
    print(f"{spec}: FAILED: 1 MiB not served: {lib.cmb_pluggable_last_error().decode()}")
    sys.exit(1)
bad = []
for size in ((1 << 64) - 1, (1 << 64) - 101, 1 << 63, (1 << 48) + 1):
    p = lib.cmb_pluggable_malloc(size, 0, None)
    why = lib.cmb_pluggable_last_error().decode()
    if p:
        bad.append(f"{size}: returned {p:#x}")
    elif "256TiB" not in why:
        bad.append(f"{size}: NULL without the reason ({why})")
again = lib.cmb_pluggable_malloc(MiB, 0, None)
if not again or again == live:
    bad.append("the next 1 MiB allocation failed or repeated a live address")
lib.cmb_pluggable_memstats_size.restype = ctypes.c_size_t
size = lib.cmb_pluggable_memstats_size()
buf = ctypes.create_string_buffer(size)
ctypes.memmove(buf, (ctypes.c_uint32 * 1)(size), 4)  # struct_size
if lib.cmb_pluggable_stats(0, buf) != 0:
    bad.append(f"stats: {lib.cmb_pluggable_last_error().decode()}")
else:  # requested_current: after struct_size, valid, device, active
    requested = int.from_bytes(buf.raw[16:24], "little", signed=True)  # requested_current
    if requested != 2 * MiB:
        bad.append(f"requested_current {requested}, expected {2 * MiB}")
for p in (live, again):
    if p:
        lib.cmb_pluggable_free(p, 0, 0, None)
print(f"{spec}: {'FAILED: ' + '; '.join(bad) if bad else 'ok: every huge size refused with the reason'}")
sys.exit(1 if bad else 0)
PY
    [ $? -eq 0 ] || status=1
done
cat "$report"
exit $status

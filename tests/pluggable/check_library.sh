#!/bin/sh
# check_library.sh LIB - libcmb_pluggable.so exports its API and nothing
# else (no suite internals that could clash inside a host program), and
# links neither libcuda (it must load where no driver is installed),
# libbenchmark nor a static CUDA runtime of its own.
set -u
lib=$1
fail=0
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
for bad in libcuda.so libbenchmark; do
    if echo "$needed" | grep -q "^$bad"; then
        echo "FAIL: $lib needs $bad" >&2
        fail=1
    fi
done
echo "$needed" | grep -q '^libcudart\.so\.' || { echo "FAIL: $lib does not use the shared CUDA runtime" >&2; fail=1; }
if nm --defined-only "$lib" 2>/dev/null | grep -q ' [Tt] cudaMalloc$'; then
    echo "FAIL: $lib carries a CUDA runtime of its own (cudart_static)" >&2
    fail=1
fi
extra=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDBRVW]/ {print $3}' |
        grep -v -E '^(cmb_pluggable_[a-z_]+|cmb_torch_[a-z_]+|cmb_cupy_(malloc|free))$' |
        grep -v -E '^(_init|_fini|_edata|_end|__bss_start)$')
if [ -n "$extra" ]; then
    echo "FAIL: $lib exports more than its API:" >&2
    echo "$extra" | head -20 >&2
    fail=1
fi
for sym in cmb_torch_malloc cmb_torch_free cmb_cupy_malloc cmb_cupy_free cmb_pluggable_stats \
           cmb_pluggable_reset_peaks cmb_pluggable_trace_start cmb_pluggable_trace_stop; do
    nm -D --defined-only "$lib" | grep -q " T $sym\$" || { echo "FAIL: $lib does not export $sym" >&2; fail=1; }
done
[ $fail -eq 0 ] && echo "ok: $lib exports its API only, needs: $(echo $needed)"
exit $fail

#!/bin/bash
# the default cost file of the GPU found, again, now with cuMemSetAccess_handles: binary b9075b0+
# (7d9a52e), every real plug-in: real/torch and real/cupy built here against this machine's PyTorch
# and CuPy, libcmb_real_rmm.so carried with librmm and librapids_logger; scripts/gpu-calibrate.sh, 15 reps
set -u
B=.gpu-build/cal
mkdir -p $B && tar xJf .gpu-build/cal.tar.xz -C $B
W=$OUT/w; mkdir -p $W
py=$(python3 -c 'import sys; print(sys.executable)')
for lib in torch cupy; do
  { cmake -S real/$lib -B /tmp/real-$lib -DCMAKE_BUILD_TYPE=Release -DCMB_REAL_OUT=$PWD/$B/real -DCMB_REAL_PYTHON="$py" &&
    cmake --build /tmp/real-$lib -j16; } >> $W/plugins-build.log 2>&1 || echo "real/$lib failed" | tee -a $W/log.txt
done
$B/cumembench --list 2>&1 | sed -n '/^real allocators/,$p' > $W/plugins-found.txt
scripts/gpu-calibrate.sh $B $W 15 > $W/log-calibrate.txt 2>&1
echo "calibrate rc $?" | tee -a $W/log.txt
grep -c found: $W/plugins-found.txt | tee -a $W/log.txt
cd $OUT && tar czf w.tgz w && rm -rf w

/* planted.cu - a kernel that fails on purpose, for the isolation tests.
 *
 * It writes through a pointer no allocation covers, so the launch succeeds
 * and the next synchronization reports cudaErrorIllegalAddress: a sticky
 * error that leaves the process's CUDA context unusable. Only the hidden
 * planted-fault scenario (scenarios/planted.c) launches it. */
#include <cuda_runtime.h>

#include "cmb_kernels.h"

namespace {

__global__ void write_through(unsigned *p)
{
    p[threadIdx.x] = 0xdeadbeefu;
}

} // namespace

extern "C" int cmb_kernel_planted_bad_write(void *stream)
{
    /* high in the 49-bit device address space, far from anything mapped */
    unsigned *bad = reinterpret_cast<unsigned *>(0x1ffff0000000ull);
    write_through<<<1, 32, 0, (cudaStream_t)stream>>>(bad);
    return (int)cudaGetLastError();
}

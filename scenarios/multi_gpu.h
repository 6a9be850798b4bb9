/* multi_gpu.h - the multi-gpu scenario's two sides: the case process that
 * coordinates and measures (multi_gpu.c) and one rank process per device
 * (multi_gpu_rank.c), as distributed training runs one process per GPU.
 *
 * The rank is this binary started as `cumembench --multi-gpu-rank`. Its
 * stdin carries, from the coordinator, one job line (tab-separated
 * key=value fields) and then one "go STEP" line per step; its descriptor 3
 * carries one answer per step back:
 *     ok STEP key=value ...     the step ran; its numbers
 *     skip STEP reason          the step does not apply (e.g. no cudaMemPool)
 *     fail STEP reason          the step failed; the case fails with it
 * End of file on stdin ends the rank: it frees what it holds, answers
 * "ok exit ..." and exits. The ranks step in turn (lockstep), so that
 * what the device's free memory loses during a step is that rank's doing.
 */
#ifndef CMB_MULTI_GPU_H
#define CMB_MULTI_GPU_H

#include <stddef.h>
#include <stdint.h>

/* Counters per rank and device: 4 x 4 fits the case's counter table. */
#define CMB_MGPU_MAX_DEVICES 4
/* Each rank's traffic: `size` bytes in this many equal blocks. */
#define CMB_MGPU_BLOCKS 8
/* Sim: a CUDA context modelled as 512 MiB on its device (the holder of
 * harness/holder.h measured about 0.5 GiB on an H200); GPU runs measure it. */
#define CMB_MGPU_SIM_CONTEXT (512ull << 20)

typedef enum cmb_mgpu_mistake {
    CMB_MGPU_NONE = 0, /* cudaSetDevice(rank) before anything else           */
    CMB_MGPU_CTX0 = 1, /* a CUDA call first makes a context on device 0      */
    CMB_MGPU_POOL0 = 2 /* and the allocator is first used there (one block)  */
} cmb_mgpu_mistake;

typedef struct cmb_mgpu_job {
    int gpu;             /* 1: real devices; 0: simulated ones              */
    int rank;
    int devices;
    char alloc[512];     /* the allocator as written: NAME[:k=v...][@UP]     */
    int mistake;         /* cmb_mgpu_mistake                                 */
    uint64_t size;       /* bytes of traffic                                 */
    uint64_t stray;      /* the block of the pool0 mistake                   */
    uint64_t capacity;   /* sim: each device's size; GPU: upstream cap (0: none) */
    uint64_t seed;
} cmb_mgpu_job;

/* One line (with '\n'); 0, or -1 when it does not fit. */
int cmb_mgpu_job_format(const cmb_mgpu_job *j, char *out, size_t len);
/* 0, or -1 with a reason in err. */
int cmb_mgpu_job_parse(const char *line, cmb_mgpu_job *j, char *err, size_t errlen);

/* The body of `cumembench --multi-gpu-rank`. */
int cmb_multi_gpu_rank_main(void);

#endif /* CMB_MULTI_GPU_H */

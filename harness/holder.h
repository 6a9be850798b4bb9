/* holder.h - "another process" that holds device memory while a case runs.
 *
 * The contention scenario needs memory taken by a process other than the
 * one under test, as it happens when a second framework or job shares the
 * GPU. The holder is this same binary started with the hidden options
 * `--hold-memory BYTES --device N`: it cudaMallocs BYTES (plain device
 * memory, never managed memory), reports "ready" (or "oom ..." / "fail
 * ...") over a pipe and then
 * blocks until the pipe to it is closed; at exit the driver frees its
 * memory. It also ends when its parent dies (PR_SET_PDEATHSIG) and it is
 * in the case's process group, which the runner kills after each case.
 */
#ifndef CMB_HOLDER_H
#define CMB_HOLDER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct cmb_holder {
    pid_t pid;       /* 0 when no holder runs           */
    int to_child;    /* its stdin: closed to release     */
    uint64_t bytes;  /* what it holds                    */
} cmb_holder;

/* Starts a holder of `bytes` on `device` and waits (at most timeout_s) until
 * it holds them. 0 on success; -2 when the device did not have the bytes
 * (cudaMalloc: out of memory), -1 on any other failure, each with a
 * one-line reason in err (the holder is gone then). The holder's own CUDA
 * context takes device memory too (about 0.5 GiB on an H200). */
int cmb_holder_start(cmb_holder *h, int device, uint64_t bytes, double timeout_s, char *err, size_t errlen);

/* Ends the holder and reaps it; its memory is free when this returns
 * (the driver releases it at the child's exit). No-op when none runs. */
void cmb_holder_stop(cmb_holder *h);

/* The holder's side: the body of `cumembench --hold-memory BYTES`. */
int cmb_holder_main(int device, uint64_t bytes);

#endif /* CMB_HOLDER_H */

/* rank.h - what decides an answer (docs/costs.md): the smallest GPU a
 * workload fits on, and what an allocator costs in time. The answers
 * (harness/answer.c) and the report (plots/cmb_report) rank by these. */
#ifndef CMB_RANK_H
#define CMB_RANK_H

#include <stddef.h>

#define CMB_RANK_BUDGET 0.05 /* allocator time at most 5% above the fastest */
#define CMB_RANK_FAR 10.0    /* a predicted time this many times the median: far above the rest */

typedef struct cmb_rank_entry {
    const char *label;   /* "rmm-pool", "cuda", ... */
    int fits;            /* ran, and every allocation in every phase succeeded */
    double min_capacity; /* smallest GPU (bytes) from which every larger one fits; NAN unknown */
    double memory;       /* the scenario's memory measure, lower better; NAN unknown */
    double time_s;       /* predicted (sim) or measured (GPU) allocator time; NAN unknown */
    int failed;          /* a case of it failed (crashed, errored): it did not run to the end */
} cmb_rank_entry;

typedef struct cmb_rank_result {
    int recommended;     /* index into the entries, -1 none */
    int fastest;         /* the fastest entry with a time, -1 none */
    int by_capacity;     /* 1: decided by the smallest GPU, 0: by the memory measure */
    int timed;           /* 1: times were known and the budget applied */
    int far[64];         /* far[i]: entry i's time is far above the rest (i < 64) */
} cmb_rank_result;

/* 1 when `label` names cudaMalloc per request ("cuda", "cuda@...", "cuda:..."). */
int cmb_rank_is_per_request(const char *label);

/* The recommendation: among the entries that fit, within the time budget
 * (time <= fastest * (1 + budget)), the one with the smallest GPU (else
 * the smallest memory measure). Never cuda per request, never an entry
 * far above the rest in time, and, without times, never for memory alone
 * an entry that pays an upstream call per request. */
void cmb_rank_recommend(const cmb_rank_entry *e, size_t n, double budget, cmb_rank_result *out);

#endif /* CMB_RANK_H */

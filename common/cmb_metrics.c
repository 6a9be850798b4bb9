/* cmb_metrics.c - fragmentation and capacity formulas. */
#include "cmb_metrics.h"

#include <math.h>

double cmb_frag_ratio(uint64_t peak_requested, uint64_t peak_reserved)
{
    if (peak_reserved == 0)
        return NAN;
    return 1.0 - (double)peak_requested / (double)peak_reserved;
}

double cmb_external_frag(uint64_t reserved, uint64_t allocated, uint64_t largest_free)
{
    if (reserved <= allocated)
        return NAN; /* nothing free inside the reservation */
    uint64_t free_reserved = reserved - allocated;
    if (largest_free > free_reserved)
        largest_free = free_reserved;
    return (double)(free_reserved - largest_free) / (double)free_reserved;
}

double cmb_capacity_ratio(uint64_t largest_alloc, uint64_t capacity, uint64_t live_requested)
{
    if (capacity <= live_requested)
        return NAN;
    return (double)largest_alloc / (double)(capacity - live_requested);
}

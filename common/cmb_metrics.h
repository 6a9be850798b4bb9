/* cmb_metrics.h - the metric formulas, exactly as the README defines them.
 *
 *   fragmentation ratio   = 1 - peak_requested / peak_reserved
 *   external fragmentation = (free_reserved - largest_free) / free_reserved,
 *                            free_reserved = reserved - allocated
 *   capacity ratio        = largest_allocation_after / (capacity - live_requested)
 *
 * Each returns NAN when undefined (nothing reserved, nothing free); the
 * writers leave an undefined metric out rather than print a zero.
 */
#ifndef CMB_METRICS_H
#define CMB_METRICS_H

#include <stdint.h>

double cmb_frag_ratio(uint64_t peak_requested, uint64_t peak_reserved);
double cmb_external_frag(uint64_t reserved, uint64_t allocated, uint64_t largest_free);
double cmb_capacity_ratio(uint64_t largest_alloc, uint64_t capacity, uint64_t live_requested);

#endif /* CMB_METRICS_H */

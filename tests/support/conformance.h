/* conformance.h - checks every allocation policy must pass, shared by the
 * per-policy tests (tests/test_policy_*.c). All run over the sim upstream.
 *
 *  random:  a long random alloc/free sequence; after every step: results
 *           aligned to 256 B, inside memory held from the upstream, never
 *           overlapping a live block; the policy's statistics agree with an
 *           independent count; the upstream sees no misuse. At the end half
 *           the blocks are still live when the policy is destroyed, and
 *           everything must come back to the upstream.
 *  faults:  the same traffic while the upstream fails every Kth request
 *           (several K) and at random: every failure is a clean
 *           CMB_ERR_OOM, nothing leaks, nothing is corrupted.
 */
#ifndef CMB_TEST_CONFORMANCE_H
#define CMB_TEST_CONFORMANCE_H

#include <stdint.h>

#include "allocators/cmb_allocator.h"
#include "allocators/upstream.h"

typedef struct cmb_conformance {
    const char *allocator; /* registry name, e.g. "bfc"          */
    const cmb_allocator_methods *methods; /* or a table of its own
                              (a loaded plug-in); then `allocator`
                              only names it in messages          */
    const char *options;   /* "k=v:k=v" or NULL                  */
    uint64_t capacity;     /* sim device bytes (default 8 GiB)   */
    uint64_t ops;          /* random steps (default 200000)      */
    uint64_t max_size;     /* largest request (default 64 MiB)   */
    int streams;           /* streams to spread traffic over (1) */
    uint64_t seed;
} cmb_conformance;

/* Opens the sim upstream and creates the allocator; asserts on failure. */
void cmb_test_open(const char *allocator, const char *options, uint64_t capacity, const cmb_fault_spec *fault,
                   cmb_upstream **up, const cmb_allocator_methods **m, void **state);
/* The same for a method table that is not in the registry (a plug-in). */
void cmb_test_open_methods(const cmb_allocator_methods *methods, const char *options, uint64_t capacity,
                           const cmb_fault_spec *fault, cmb_upstream **up, void **state);

void cmb_conformance_random(const cmb_conformance *c);
void cmb_conformance_faults(const cmb_conformance *c);

#endif /* CMB_TEST_CONFORMANCE_H */

/* cmb_hashmap.h - an open-addressing map from 64-bit keys to 64-bit values.
 *
 * Linear probing with backward-shift deletion (no tombstones), so a long
 * churn of inserts and erases keeps probe sequences short. Key 0 is
 * reserved as the empty marker; callers map pointers, which are never 0.
 * Used for live-block tables (pointer -> size) and trace id maps.
 */
#ifndef CMB_HASHMAP_H
#define CMB_HASHMAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmb_hashmap {
    uint64_t *keys;
    uint64_t *vals;
    size_t mask;   /* capacity - 1; capacity is a power of two */
    size_t count;
} cmb_hashmap;

/* Returns 0 on success, -1 when host memory runs out. */
int cmb_hashmap_init(cmb_hashmap *m, size_t expected);
void cmb_hashmap_free(cmb_hashmap *m);
void cmb_hashmap_clear(cmb_hashmap *m);

/* Insert or overwrite. Returns 0, or -1 on host OOM or key 0. */
int cmb_hashmap_put(cmb_hashmap *m, uint64_t key, uint64_t val);
/* Returns 1 and sets *val when found, else 0. val may be NULL. */
int cmb_hashmap_get(const cmb_hashmap *m, uint64_t key, uint64_t *val);
/* Returns 1 and sets *val (may be NULL) when removed, 0 when absent. */
int cmb_hashmap_remove(cmb_hashmap *m, uint64_t key, uint64_t *val);

/* Iterate: for (size_t i = 0; cmb_hashmap_next(m, &i, &k, &v);) */
int cmb_hashmap_next(const cmb_hashmap *m, size_t *iter, uint64_t *key, uint64_t *val);

#ifdef __cplusplus
}
#endif

#endif /* CMB_HASHMAP_H */

/* cmb_vec.h - a growing array's one slow path: room for one more item,
 * doubling (from `first` items) when it is full. */
#ifndef CMB_VEC_H
#define CMB_VEC_H

#include <stddef.h>
#include <stdlib.h>

/* Makes *items (items of `size` bytes, *cap of them) hold at least n + 1.
 * 0, or -1 on host memory with *items and *cap unchanged. */
static inline int cmb_vec_room(void **items, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap)
        return 0;
    size_t want = *cap ? *cap * 2 : first;
    void *grown = realloc(*items, want * size);
    if (!grown)
        return -1;
    *items = grown;
    *cap = want;
    return 0;
}

#endif /* CMB_VEC_H */

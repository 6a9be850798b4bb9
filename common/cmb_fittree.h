/* cmb_fittree.h - an address-ordered set with first-fit search.
 *
 * Address-ordered first fit ("the first free block, by address, that holds
 * n bytes") is the placement rule of RMM's arena, jemalloc and many others.
 * A plain ordered set answers it with a linear scan; this one keeps, in
 * every node, the largest `size` of its subtree, so the search descends in
 * O(log n): left while the left subtree has a fitting node, else this node,
 * else right.
 *
 * The tree is an intrusive treap: random priorities drawn from a fixed-seed
 * generator, so the shape (and every run) is deterministic; insert, erase,
 * update and the searches are O(log n) expected, with no allocation inside.
 * Keys are unique.
 */
#ifndef CMB_FITTREE_H
#define CMB_FITTREE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmb_ftnode {
    struct cmb_ftnode *left;
    struct cmb_ftnode *right;
    uint64_t key;  /* the order: a start address                 */
    uint64_t size; /* what first fit searches on                  */
    uint64_t max;  /* largest size in this subtree (kept by tree) */
    uint64_t prio; /* heap order of the treap (kept by tree)      */
} cmb_ftnode;

typedef struct cmb_fittree {
    cmb_ftnode *root;
    size_t count;
    uint64_t rng; /* priority generator state */
} cmb_fittree;

#define cmb_ft_entry(node, type, member) ((type *)((char *)(node) - offsetof(type, member)))

void cmb_ft_init(cmb_fittree *t);

/* Insert n with n->key and n->size set; the key must not be present. */
void cmb_ft_insert(cmb_fittree *t, cmb_ftnode *n);
/* Remove n, which must be in t. */
void cmb_ft_erase(cmb_fittree *t, cmb_ftnode *n);
/* Change n's key and size in place. The new key must keep n between its
 * neighbours (true when a free block shrinks from the front or grows
 * backwards into a gap). */
void cmb_ft_update(cmb_fittree *t, cmb_ftnode *n, uint64_t key, uint64_t size);

/* The node of lowest key whose size >= size, or NULL. */
cmb_ftnode *cmb_ft_first_fit(const cmb_fittree *t, uint64_t size);
/* The node of greatest key <= key, or NULL. */
cmb_ftnode *cmb_ft_floor(const cmb_fittree *t, uint64_t key);
/* The node of least key >= key, or NULL. */
cmb_ftnode *cmb_ft_ceil(const cmb_fittree *t, uint64_t key);
cmb_ftnode *cmb_ft_first(const cmb_fittree *t);

/* The largest size in the tree, 0 when empty: O(1). */
static inline uint64_t cmb_ft_max(const cmb_fittree *t)
{
    return t->root ? t->root->max : 0;
}

/* Call fn on every node, children before parents (fn may free the node),
 * and leave the tree empty. */
void cmb_ft_clear(cmb_fittree *t, void (*fn)(cmb_ftnode *n, void *arg), void *arg);

/* Checks order, heap and max invariants; returns the node count or -1. For tests. */
long cmb_ft_validate(const cmb_fittree *t);

#ifdef __cplusplus
}
#endif

#endif /* CMB_FITTREE_H */

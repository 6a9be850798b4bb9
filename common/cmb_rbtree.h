/* cmb_rbtree.h - an intrusive red-black tree.
 *
 * The ordered sets of the allocator policies (free blocks by size, by
 * address, by stream) embed a cmb_rbnode in their block struct, as the Linux
 * kernel's rbtree does: no allocation inside the tree, O(log n) insert,
 * erase and lower-bound search, O(1) amortised next/prev.
 *
 * Equal keys are allowed; an equal node is placed after the existing ones.
 */
#ifndef CMB_RBTREE_H
#define CMB_RBTREE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmb_rbnode {
    struct cmb_rbnode *parent;
    struct cmb_rbnode *left;
    struct cmb_rbnode *right;
    int red;
} cmb_rbnode;

typedef struct cmb_rbtree {
    cmb_rbnode *root;
    size_t count;
} cmb_rbtree;

/* Order of two nodes: <0, 0, >0. */
typedef int (*cmb_rb_cmp_fn)(const cmb_rbnode *a, const cmb_rbnode *b);
/* Order of a search key against a node: <0 when key sorts before node. */
typedef int (*cmb_rb_keycmp_fn)(const void *key, const cmb_rbnode *node);

#define cmb_rb_entry(node, type, member) \
    ((type *)((char *)(node) - offsetof(type, member)))

static inline void cmb_rb_init(cmb_rbtree *t)
{
    t->root = NULL;
    t->count = 0;
}

void cmb_rb_insert(cmb_rbtree *t, cmb_rbnode *n, cmb_rb_cmp_fn cmp);
/* Insert at a place found by the caller's own descent, for hot paths that
 * compare inline (Linux's rb_link_node + rb_insert_color): `parent` is the
 * last node visited (NULL for an empty tree) and `link` the empty child
 * slot of it where n goes (&t->root for an empty tree). */
void cmb_rb_link(cmb_rbtree *t, cmb_rbnode *n, cmb_rbnode *parent, cmb_rbnode **link);
void cmb_rb_erase(cmb_rbtree *t, cmb_rbnode *n);

cmb_rbnode *cmb_rb_first(const cmb_rbtree *t);
cmb_rbnode *cmb_rb_last(const cmb_rbtree *t);
cmb_rbnode *cmb_rb_next(const cmb_rbnode *n);
cmb_rbnode *cmb_rb_prev(const cmb_rbnode *n);

/* First node not ordered before `key` (keycmp(key, node) <= 0), or NULL. */
cmb_rbnode *cmb_rb_lower_bound(const cmb_rbtree *t, const void *key, cmb_rb_keycmp_fn keycmp);
/* Last node not ordered after `key` (keycmp(key, node) >= 0), or NULL. */
cmb_rbnode *cmb_rb_floor(const cmb_rbtree *t, const void *key, cmb_rb_keycmp_fn keycmp);

/* Checks the red-black invariants and the order; returns the black height,
 * or -1 when broken. For tests. */
int cmb_rb_validate(const cmb_rbtree *t, cmb_rb_cmp_fn cmp);

#ifdef __cplusplus
}
#endif

#endif /* CMB_RBTREE_H */

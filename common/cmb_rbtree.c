/* cmb_rbtree.c - intrusive red-black tree (CLRS, with parent pointers and
 * NULL leaves). */
#include "cmb_rbtree.h"

/* --- rotations ----------------------------------------------------------- */

static void replace_child(cmb_rbtree *t, cmb_rbnode *parent, cmb_rbnode *old, cmb_rbnode *new_)
{
    if (!parent)
        t->root = new_;
    else if (parent->left == old)
        parent->left = new_;
    else
        parent->right = new_;
}

static void rotate_left(cmb_rbtree *t, cmb_rbnode *x)
{
    cmb_rbnode *y = x->right;
    x->right = y->left;
    if (y->left)
        y->left->parent = x;
    y->parent = x->parent;
    replace_child(t, x->parent, x, y);
    y->left = x;
    x->parent = y;
}

static void rotate_right(cmb_rbtree *t, cmb_rbnode *x)
{
    cmb_rbnode *y = x->left;
    x->left = y->right;
    if (y->right)
        y->right->parent = x;
    y->parent = x->parent;
    replace_child(t, x->parent, x, y);
    y->right = x;
    x->parent = y;
}

/* --- insert -------------------------------------------------------------- */

static void insert_fixup(cmb_rbtree *t, cmb_rbnode *z)
{
    while (z->parent && z->parent->red) {
        cmb_rbnode *p = z->parent;
        cmb_rbnode *g = p->parent;
        if (p == g->left) {
            cmb_rbnode *u = g->right;
            if (u && u->red) {
                p->red = 0;
                u->red = 0;
                g->red = 1;
                z = g;
                continue;
            }
            if (z == p->right) {
                z = p;
                rotate_left(t, z);
                p = z->parent;
            }
            p->red = 0;
            g->red = 1;
            rotate_right(t, g);
        } else {
            cmb_rbnode *u = g->left;
            if (u && u->red) {
                p->red = 0;
                u->red = 0;
                g->red = 1;
                z = g;
                continue;
            }
            if (z == p->left) {
                z = p;
                rotate_right(t, z);
                p = z->parent;
            }
            p->red = 0;
            g->red = 1;
            rotate_left(t, g);
        }
    }
    t->root->red = 0;
}

void cmb_rb_link(cmb_rbtree *t, cmb_rbnode *n, cmb_rbnode *parent, cmb_rbnode **link)
{
    n->parent = parent;
    n->left = n->right = NULL;
    n->red = 1;
    *link = n;
    t->count++;
    insert_fixup(t, n);
}

void cmb_rb_insert(cmb_rbtree *t, cmb_rbnode *n, cmb_rb_cmp_fn cmp)
{
    cmb_rbnode *parent = NULL;
    cmb_rbnode **link = &t->root;
    while (*link) {
        parent = *link;
        link = cmp(n, parent) < 0 ? &parent->left : &parent->right;
    }
    cmb_rb_link(t, n, parent, link);
}

/* --- erase --------------------------------------------------------------- */

static cmb_rbnode *subtree_min(cmb_rbnode *n)
{
    while (n->left)
        n = n->left;
    return n;
}

static cmb_rbnode *subtree_max(cmb_rbnode *n)
{
    while (n->right)
        n = n->right;
    return n;
}

/* Restore the invariants after removing a black node; x (possibly NULL)
 * took its place under xp. */
static void erase_fixup(cmb_rbtree *t, cmb_rbnode *x, cmb_rbnode *xp)
{
    while (x != t->root && (!x || !x->red)) {
        if (x == xp->left) {
            cmb_rbnode *w = xp->right;
            if (w->red) {
                w->red = 0;
                xp->red = 1;
                rotate_left(t, xp);
                w = xp->right;
            }
            if ((!w->left || !w->left->red) && (!w->right || !w->right->red)) {
                w->red = 1;
                x = xp;
                xp = x->parent;
            } else {
                if (!w->right || !w->right->red) {
                    w->left->red = 0;
                    w->red = 1;
                    rotate_right(t, w);
                    w = xp->right;
                }
                w->red = xp->red;
                xp->red = 0;
                if (w->right)
                    w->right->red = 0;
                rotate_left(t, xp);
                x = t->root;
                xp = NULL;
            }
        } else {
            cmb_rbnode *w = xp->left;
            if (w->red) {
                w->red = 0;
                xp->red = 1;
                rotate_right(t, xp);
                w = xp->left;
            }
            if ((!w->right || !w->right->red) && (!w->left || !w->left->red)) {
                w->red = 1;
                x = xp;
                xp = x->parent;
            } else {
                if (!w->left || !w->left->red) {
                    w->right->red = 0;
                    w->red = 1;
                    rotate_left(t, w);
                    w = xp->left;
                }
                w->red = xp->red;
                xp->red = 0;
                if (w->left)
                    w->left->red = 0;
                rotate_right(t, xp);
                x = t->root;
                xp = NULL;
            }
        }
    }
    if (x)
        x->red = 0;
}

void cmb_rb_erase(cmb_rbtree *t, cmb_rbnode *z)
{
    cmb_rbnode *x, *xp;
    int removed_red;

    if (!z->left || !z->right) {
        /* z has at most one child: splice it out. */
        x = z->left ? z->left : z->right;
        xp = z->parent;
        removed_red = z->red;
        if (x)
            x->parent = xp;
        replace_child(t, xp, z, x);
    } else {
        /* Two children: move the successor y into z's place. */
        cmb_rbnode *y = subtree_min(z->right);
        removed_red = y->red;
        x = y->right;
        if (y->parent == z) {
            xp = y;
        } else {
            xp = y->parent;
            xp->left = x;
            if (x)
                x->parent = xp;
            y->right = z->right;
            z->right->parent = y;
        }
        y->left = z->left;
        z->left->parent = y;
        y->parent = z->parent;
        replace_child(t, z->parent, z, y);
        y->red = z->red;
    }
    t->count--;
    if (!removed_red)
        erase_fixup(t, x, xp);
    z->parent = z->left = z->right = NULL;
}

/* --- traversal and search ------------------------------------------------ */

cmb_rbnode *cmb_rb_first(const cmb_rbtree *t)
{
    return t->root ? subtree_min(t->root) : NULL;
}

cmb_rbnode *cmb_rb_last(const cmb_rbtree *t)
{
    return t->root ? subtree_max(t->root) : NULL;
}

cmb_rbnode *cmb_rb_next(const cmb_rbnode *n)
{
    if (n->right)
        return subtree_min(n->right);
    while (n->parent && n == n->parent->right)
        n = n->parent;
    return n->parent;
}

cmb_rbnode *cmb_rb_prev(const cmb_rbnode *n)
{
    if (n->left)
        return subtree_max(n->left);
    while (n->parent && n == n->parent->left)
        n = n->parent;
    return n->parent;
}

cmb_rbnode *cmb_rb_lower_bound(const cmb_rbtree *t, const void *key, cmb_rb_keycmp_fn keycmp)
{
    cmb_rbnode *n = t->root, *best = NULL;
    while (n) {
        if (keycmp(key, n) <= 0) {
            best = n;
            n = n->left;
        } else {
            n = n->right;
        }
    }
    return best;
}

cmb_rbnode *cmb_rb_floor(const cmb_rbtree *t, const void *key, cmb_rb_keycmp_fn keycmp)
{
    cmb_rbnode *n = t->root, *best = NULL;
    while (n) {
        if (keycmp(key, n) >= 0) {
            best = n;
            n = n->right;
        } else {
            n = n->left;
        }
    }
    return best;
}

/* --- validation (tests) -------------------------------------------------- */

static int validate_node(const cmb_rbnode *n, const cmb_rbnode *parent, cmb_rb_cmp_fn cmp, size_t *seen)
{
    if (!n)
        return 1;
    if (n->parent != parent)
        return -1;
    if (n->red && ((n->left && n->left->red) || (n->right && n->right->red)))
        return -1;
    if (n->left && cmp(n->left, n) > 0)
        return -1;
    if (n->right && cmp(n->right, n) < 0)
        return -1;
    int lh = validate_node(n->left, n, cmp, seen);
    int rh = validate_node(n->right, n, cmp, seen);
    if (lh < 0 || rh < 0 || lh != rh)
        return -1;
    (*seen)++;
    return lh + (n->red ? 0 : 1);
}

int cmb_rb_validate(const cmb_rbtree *t, cmb_rb_cmp_fn cmp)
{
    size_t seen = 0;
    if (t->root && t->root->red)
        return -1;
    int h = validate_node(t->root, NULL, cmp, &seen);
    if (h < 0 || seen != t->count)
        return -1;
    /* In-order walk must be sorted (checks beyond parent-child pairs). */
    const cmb_rbnode *prev = NULL;
    for (const cmb_rbnode *n = cmb_rb_first(t); n; n = cmb_rb_next(n)) {
        if (prev && cmp(prev, n) > 0)
            return -1;
        prev = n;
    }
    return h;
}

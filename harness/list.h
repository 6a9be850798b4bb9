/* list.h - the --list output. */
#ifndef CMB_LIST_H
#define CMB_LIST_H

#include <stdio.h>

void cmb_list(FILE *f);

#endif /* CMB_LIST_H */

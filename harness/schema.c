/* schema.c - the CSV header and column names, generated from schema.def. */
#include "schema.h"

#include <stdio.h>

/* Each column adds ",name"; the header starts after the first comma. */
static const char header_with_comma[] =
#define CMB_COLUMN(id, name, doc) "," #name
#include "schema.def"
#undef CMB_COLUMN
    "\n";

const char *const cmb_csv_header = header_with_comma + 1;
const size_t cmb_csv_header_len = sizeof header_with_comma - 2;

static const char *const col_names[CMB_N_COLS] = {
#define CMB_COLUMN(id, name, doc) #name,
#include "schema.def"
#undef CMB_COLUMN
};

const char *cmb_col_name(int col)
{
    return col >= 0 && col < CMB_N_COLS ? col_names[col] : NULL;
}

void cmb_oom_message(double n_failed, char *out, size_t len)
{
    snprintf(out, len, "did not fit: %.0f allocation%s failed", n_failed, n_failed == 1 ? "" : "s");
}

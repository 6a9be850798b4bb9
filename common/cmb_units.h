/* cmb_units.h - strict parsing of numbers and byte sizes from the command
 * line and trace files, and human-readable formatting of sizes. */
#ifndef CMB_UNITS_H
#define CMB_UNITS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Byte sizes: "4096", "4KiB", "4K", "2MiB", "1.5GiB", "1TiB" (binary
 * multiples; "KB"/"MB"/"GB" are read as binary too, as CUDA tools print
 * them). The whole string must be consumed. Returns 0 on success, -1 on a
 * malformed value or overflow. */
int cmb_parse_size(const char *s, uint64_t *out);

/* Byte sizes, strictly: a number (an optional fraction) and one of the
 * units B, KiB, MiB, GiB, TiB (powers of 1024; "64mb", "64M", "64MB" are
 * refused as ambiguous, never read as MiB). A bare number is read in
 * `bare_unit` ("B", "MiB"), or refused when it is NULL (except 0). Allocator
 * options are read this way (allocators/cmb_option_check.h, the same code).
 * 0, or -1 with a one-line reason in why. */
int cmb_parse_size_strict(const char *s, const char *bare_unit, uint64_t *out, char *why, size_t whylen);

/* Integers: decimal or 0x hex, whole string, no sign for the unsigned one.
 * 0, or -1 when malformed, or CMB_PARSE_TOO_LARGE when well formed but
 * outside the type (a caller then says "too large", not "expected ..."). */
#define CMB_PARSE_TOO_LARGE (-2)
int cmb_parse_u64(const char *s, uint64_t *out);
int cmb_parse_i64(const char *s, int64_t *out);
/* Finite doubles, whole string. */
int cmb_parse_double(const char *s, double *out);
/* true/false/1/0/yes/no/on/off */
int cmb_parse_bool(const char *s, int *out);

/* "1.50 GiB" into buf; returns buf. */
const char *cmb_format_size(uint64_t bytes, char *buf, size_t buflen);

#ifdef __cplusplus
}
#endif

#endif /* CMB_UNITS_H */

/* cmb_io.h - small I/O helpers shared by the output writers. */
#ifndef CMB_IO_H
#define CMB_IO_H

#include <stddef.h>

/* Writes all of buf to fd, retrying short writes and EINTR. 0, or -1. */
int cmb_write_all(int fd, const char *buf, size_t len);

#endif /* CMB_IO_H */

/* cmb_io.c - whole writes. */
#include "cmb_io.h"

#include <errno.h>
#include <unistd.h>

int cmb_write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t w = write(fd, buf, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

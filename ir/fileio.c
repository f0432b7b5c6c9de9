#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

zstatus zfile_begin(zfile_out *o, const char *path, zdiag *d) {
    memset(o, 0, sizeof *o);
    size_t n = strlen(path);
    o->path = malloc(n + 1);
    o->tmp = malloc(n + 32);
    if (!o->path || !o->tmp) {
        free(o->path);
        free(o->tmp);
        return zdiag_set(d, ZE_NOMEM, "out of memory");
    }
    memcpy(o->path, path, n + 1);
    snprintf(o->tmp, n + 32, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(o->tmp);
    /* mkstemp creates 0600; models and plans are meant to be shared. */
    if (fd < 0 || fchmod(fd, 0644) != 0 || !(o->fp = fdopen(fd, "wb"))) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(o->tmp);
        }
        free(o->path);
        free(o->tmp);
        o->path = o->tmp = NULL;
        return zdiag_set(d, ZE_IO, "cannot write %s: %s", path, strerror(e));
    }
    return ZOK;
}

zstatus zfile_end(zfile_out *o, zstatus ok, zdiag *d) {
    zstatus s = ok;
    if (!o->fp) return s ? s : zdiag_set(d, ZE_INTERNAL, "zfile_end without zfile_begin");
    if (!s && (ferror(o->fp) || fflush(o->fp) || fsync(fileno(o->fp))))
        s = zdiag_set(d, ZE_IO, "cannot write %s: %s", o->path, strerror(errno));
    if (fclose(o->fp) && !s) s = zdiag_set(d, ZE_IO, "cannot write %s: %s", o->path, strerror(errno));
    if (!s && rename(o->tmp, o->path))
        s = zdiag_set(d, ZE_IO, "cannot write %s: %s", o->path, strerror(errno));
    if (s) unlink(o->tmp);
    free(o->path);
    free(o->tmp);
    memset(o, 0, sizeof *o);
    return s;
}

zstatus zfile_write_atomic(const char *path, const void *data, size_t n, zdiag *d) {
    zfile_out o;
    zstatus s = zfile_begin(&o, path, d);
    if (s) return s;
    if (n && fwrite(data, 1, n, o.fp) != n)
        s = zdiag_set(d, ZE_IO, "cannot write %s: %s", path, strerror(errno));
    return zfile_end(&o, s, d);
}

zstatus zfile_map(const char *path, const void **data, uint64_t *size, zdiag *d) {
    *data = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return zdiag_set(d, ZE_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    zstatus s = ZOK;
    if (fstat(fd, &sb) != 0)
        s = zdiag_set(d, ZE_IO, "cannot open %s: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        s = zdiag_set(d, ZE_IO, "cannot open %s: %s", path,
                      S_ISDIR(sb.st_mode) ? "is a directory" : "not a regular file");
    else if (sb.st_size > 0) { /* mmap of zero bytes fails */
        void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED)
            s = zdiag_set(d, ZE_IO, "cannot map %s: %s", path, strerror(errno));
        else {
            *data = map;
            *size = (uint64_t)sb.st_size;
        }
    }
    close(fd);
    return s;
}

void zfile_unmap(const void *data, uint64_t size) {
    if (data) munmap((void *)data, (size_t)size);
}

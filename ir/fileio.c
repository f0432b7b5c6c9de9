#include "fileio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
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
    if (fd < 0 || !(o->fp = fdopen(fd, "wb"))) {
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
        s = zdiag_set(d, ZE_IO, "cannot rename into %s: %s", o->path, strerror(errno));
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

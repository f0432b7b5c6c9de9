/* Whole-file output that never leaves a half-written file: data goes to a
 * temporary file beside the target, is flushed, and is renamed into place. */
#ifndef ZINC_FILEIO_H
#define ZINC_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "zstatus.h"

typedef struct zfile_out {
    FILE *fp;
    char *path, *tmp;
} zfile_out;

/* Opens a temporary file beside path. */
zstatus zfile_begin(zfile_out *o, const char *path, zdiag *d);
/* Flushes, syncs and renames when ok is ZOK (and writes succeeded); otherwise
 * removes the temporary. Returns the first failure. */
zstatus zfile_end(zfile_out *o, zstatus ok, zdiag *d);

zstatus zfile_write_atomic(const char *path, const void *data, size_t n, zdiag *d);

/* Maps a regular file read-only. An empty file maps to data NULL, size 0
 * (readers reject it with their own message). Release with zfile_unmap. */
zstatus zfile_map(const char *path, const void **data, uint64_t *size, zdiag *d);
void zfile_unmap(const void *data, uint64_t size);

#endif

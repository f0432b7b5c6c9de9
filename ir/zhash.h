/* uthash, configured for zincc: tables allocate from an arena and an
 * allocation failure sets a flag instead of calling exit().
 *
 * Before any HASH_ADD*, point zhash_arena at the arena that owns the table
 * and clear zhash_oom; check zhash_oom afterwards. */
#ifndef ZINC_ZHASH_H
#define ZINC_ZHASH_H

#include "arena.h"

extern _Thread_local zarena *zhash_arena;
extern _Thread_local int zhash_oom;

#define uthash_malloc(sz)        zarena_alloc(zhash_arena, (sz))
#define uthash_free(ptr, sz)     ((void)(ptr), (void)(sz))
#define HASH_NONFATAL_OOM        1
#define uthash_nonfatal_oom(obj) ((void)(obj), zhash_oom = 1)
#include <uthash.h>

#endif

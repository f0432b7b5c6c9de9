/* The version of zincc and zinc. A plan cache entry is keyed by it (and by the
 * build of the compiler itself: tools/plan_cache.c), so a new compiler never
 * trusts the plans of an old one. */
#ifndef ZINC_VERSION_H
#define ZINC_VERSION_H

#define ZINC_VERSION "0.1.0"

#endif

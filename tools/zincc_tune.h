/* zincc --tune: times the decode GEMVs' layouts and the prefill GEMMs' on
 * the device compiled for (backend/tune.h) and prints what it measured on
 * stderr. */
#ifndef ZINC_ZINCC_TUNE_H
#define ZINC_ZINCC_TUNE_H

#include "../backend/codegen.h"

/* device: zincc's --device request (NULL: the default device). */
/* prefill (or NULL): its GEMMs on the matrix units, at steps of chunk tokens. */
zstatus zincc_tune(const char *device, const zir_graph *decode, const zir_graph *prefill, int64_t chunk,
                   const ztarget *t, int64_t ctx, zarena *a, zcg_tuning *out, zdiag *d);

#endif

/* zincc --tune: times the decode GEMVs' layouts on the device compiled for
 * (backend/tune.h) and prints what it measured on stderr. */
#ifndef ZINC_ZINCC_TUNE_H
#define ZINC_ZINCC_TUNE_H

#include "../backend/codegen.h"

/* device: zincc's --device request (NULL: the default device). */
zstatus zincc_tune(const char *device, const zir_graph *decode, const ztarget *t, int64_t ctx, zarena *a,
                   zcg_tuning *out, zdiag *d);

#endif

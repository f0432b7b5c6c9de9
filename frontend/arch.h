/* Architecture builders: from a parsed GGUF to a tensor IR graph.
 *
 * Each supported architecture is one row of a table (frontend/arch.c) of the
 * traits that set it apart (RoPE style, q/k norm, QKV bias); one function
 * describes a transformer layer from those traits and is repeated per layer.
 * Adding a Llama-like architecture is a row, not a new builder. */
#ifndef ZINC_ARCH_H
#define ZINC_ARCH_H

#include "../ir/ir.h"
#include "gguf.h"

/* Builds the graph of the model in f. Weights point into f's mapping, so f
 * must outlive the graph. Errors name the key or tensor at fault. */
zstatus zir_build_from_gguf(const gguf_file *f, zir_graph **out, zdiag *d);

/* Reads the hyperparameters only (used by tools that print model facts). */
zstatus zir_read_hparams(const gguf_file *f, zir_hparams *hp, zdiag *d);

/* Comma-separated names of the supported architectures, for messages. */
const char *zir_supported_archs(void);

#endif

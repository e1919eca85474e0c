/* From fused graph to kernel IR, and the plan passes over kernel IR.
 *
 * Lowering (codegen/lower.c) reads the fusion roles that passes/fuse.c gives a program's nodes:
 * codegen consumes what passes produce, never the other way round, so passes/ sees only the graph
 * IR. The plan pass that runs after lowering (prologue and epilogue fusion, codegen/prologue.c)
 * and the kernel analyses the backends share (codegen/borders.h) are kernel-IR code and live here
 * too. The program layer (program/pipeline.c) calls them in order. */
#ifndef NX_CODEGEN_LOWER_H
#define NX_CODEGEN_LOWER_H

#include "codegen/kernel.h"
#include "passes/fuse.h"

/* One kernel per ROOT of role (passes/fuse.h) in id order. NX_ERR_UNSUPPORTED when some node
 * cannot be lowered (the message names it). */
NX_HIDDEN nx_status nx_lower_plan(nx_ctx *ctx, const nx_ir_store *s, int noutputs,
                                  const nx_node *outputs, const uint8_t *role, nx_kplan **out);

/* Prologue and epilogue fusion (codegen/prologue.c) on a validated plan, when supports accepts
 * every kernel: a loop kernel whose output only one library kernel reads moves into it where
 * supports accepts the result. supports NULL: nothing changes. */
NX_HIDDEN nx_status nx_prologue_fuse(nx_kplan *p, bool (*supports)(const nx_kernel *));

#endif /* NX_CODEGEN_LOWER_H */

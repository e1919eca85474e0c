/* The walk over a kernel plan that every backend runs (plan-run.c): bind the input and constant
 * slots, run the kernels in order with each output slot allocated just before its kernel and
 * each temporary freed after its last reader, then hand over the program outputs. A backend
 * supplies what differs: where a slot's memory lives and how a kernel runs.
 *
 * Slots are nx_tensor objects (host or device). The runner owns every slot tensor the hooks give
 * it, except input slots a backend declares borrowed; on failure no output is left allocated. */
#ifndef NX_CODEGEN_PLAN_RUN_H
#define NX_CODEGEN_PLAN_RUN_H

#include "codegen/kernel.h"

typedef struct nx_plan_hooks {
    /* Input slots are the caller's tensors themselves (not freed by the runner). */
    bool borrow_inputs;
    /* The tensor of an INPUT slot (unless borrowed) or a CONSTANT slot. */
    nx_status (*bind)(void *be, int slot, const nx_kslot *sl, nx_tensor **out);
    /* A new tensor for kernel ki's OUT buffer b. */
    nx_status (*alloc)(void *be, int ki, const nx_kernel *k, int b, nx_tensor **out);
    /* Runs kernel ki over the slots' tensors (slot[k->bufs[b].slot] is buffer b's). */
    nx_status (*run)(void *be, int ki, const nx_kernel *k, nx_tensor *const *slot);
    /* After the last kernel, before the outputs are taken (NULL: nothing to wait for). */
    nx_status (*sync)(void *be);
    /* Output i from slot tensor t. movable: t is a temporary no later output needs, which the
     * hook may hand over as it is (setting *moved); otherwise it makes a copy. */
    nx_status (*take)(void *be, nx_tensor *t, bool movable, nx_tensor **out, bool *moved);
    /* After every output is taken (NULL: nothing to do), e.g. waiting for copies in flight. */
    nx_status (*done)(void *be);
} nx_plan_hooks;

/* Runs plan p: inputs by program argument, outputs[i] receives program output i. */
NX_HIDDEN nx_status nx_plan_run(nx_ctx *ctx, const nx_kplan *p, const nx_plan_hooks *h, void *be,
                                const nx_tensor *const *inputs, nx_tensor **outputs);

#endif /* NX_CODEGEN_PLAN_RUN_H */

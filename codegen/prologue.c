/* Prologue and epilogue fusion: a loop kernel whose output only one library kernel reads becomes
 * that library kernel's prologue (codegen/kernel.h), and a loop kernel that is the only reader of
 * a library kernel's result its epilogue, where the backend accepts them.
 *
 * Fusion (passes/fuse.c) materialises every operand of a library primitive: a scan reads whole
 * buffers. When the operand is an elementwise or movement expression (the padded, scaled line a
 * recursive filter runs over), that costs a kernel which writes the operand and a read of it by
 * the scan: twice the operand's bytes through memory, for values the scan could compute as it
 * loads them. A backend whose library routine can evaluate a loop body at each element it reads
 * (the CUDA scans, codegen/ptx/emit-lib.c) takes the loop kernel in as a prologue: the operand's
 * slot is never written, and the loop kernel's own inputs are read at the library kernel's place
 * in the plan instead of the loop kernel's (both run after every kernel those inputs come from,
 * since a slot has one writer that precedes its readers).
 *
 * An epilogue is the mirror image: the library routine hands each result element to the loop
 * kernel's body instead of storing it, and the body's output is stored (the recursive Gaussian's
 * last finish, read from the last anti-causal scan). The loop kernel's other inputs must be ready
 * where the library kernel runs; a kernel writing one of them later is moved up to just before
 * it when its own inputs are ready there.
 *
 * The pass runs only when the backend supports every kernel of the plan as lowered: a plan that
 * falls back whole to another backend (codegen/ptx/backend.c) must stay one that backend can run,
 * and no backend other than the one asked sees a prologue. Each fused kernel is offered to the
 * backend's supports() before it replaces the pair. */
#include <string.h>

#include "codegen/lower.h"

static bool is_output_slot(const nx_kplan *p, uint32_t slot)
{
    for (int i = 0; i < p->noutputs; i++)
        if ((uint32_t)p->outputs[i] == slot)
            return true;
    return false;
}

/* The kernel writing slot (there is one), or -1. */
static int writer_of(const nx_kplan *p, uint32_t slot)
{
    for (int ki = 0; ki < p->nkernels; ki++) {
        const nx_kernel *k = p->kernels[ki];
        for (int b = 0; b < k->nbufs; b++)
            if (k->bufs[b].role == NX_KBUF_OUT && k->bufs[b].slot == slot)
                return ki;
    }
    return -1;
}

/* Buffers of all kernels bound to slot for reading. */
static int readers_of(const nx_kplan *p, uint32_t slot)
{
    int n = 0;
    for (int ki = 0; ki < p->nkernels; ki++) {
        const nx_kernel *k = p->kernels[ki];
        for (int b = 0; b < k->nbufs; b++)
            n += k->bufs[b].role == NX_KBUF_IN && k->bufs[b].slot == slot;
    }
    return n;
}

/* A loop kernel that can be a prologue: one output, no reduction loops. */
static bool prologue_shaped(const nx_kernel *w)
{
    if (w->kind != NX_KERNEL_LOOP || w->nloops != w->ndim || w->nstores != 1)
        return false;
    int outs = 0;
    for (int b = 0; b < w->nbufs; b++)
        outs += w->bufs[b].role == NX_KBUF_OUT;
    return outs == 1;
}

/* The fused kernel: lib's buffers with buffer `value` made a VALUE, then w's placed by map
 * (map[b] < 0: dropped; map[b] == value: w's reads of lib's result), w's body with its loads
 * renumbered, storing into `value` (a prologue) or its own output (an epilogue). */
static nx_status fuse_body(const nx_kernel *lib, int value, const nx_kernel *w, const int *map,
                           int nb, bool epilogue, nx_kernel **out)
{
    *out = NULL;
    const char *what = epilogue ? "epilogue fusion" : "prologue fusion";
    nx_kernel *f = NULL;
    nx_status st = nx_kernel_new(lib->ctx, NX_KERNEL_LIBRARY, lib->name, &f);
    if (st != NX_OK)
        return st;
    f->nbufs = nb;
    memcpy(f->bufs, lib->bufs, (size_t)lib->nbufs * sizeof *f->bufs);
    f->bufs[value].role = NX_KBUF_VALUE;
    for (int b = 0; b < w->nbufs; b++)
        if (map[b] >= 0 && map[b] != value)
            f->bufs[map[b]] = w->bufs[b];
    f->lib_prim = lib->lib_prim;
    f->nattrs = lib->nattrs;
    memcpy(f->attrs, lib->attrs, sizeof f->attrs);
    f->lib_ptr = lib->lib_ptr;
    f->lib_node = lib->lib_node;
    f->has_prologue = !epilogue;
    f->pro_operand = epilogue ? 0 : value;
    f->has_epilogue = epilogue;
    f->epi_source = epilogue ? value : 0;
    nx_kernel_space(f, w->ndim, w->extent);
    for (int i = 0; i < w->ninst && st == NX_OK; i++) {
        nx_kinst in = w->inst[i];
        if (in.op == NX_KOP_LOAD)
            in.a[0] = map[in.a[0]];
        if (nx_kernel_emit(f, in) < 0)
            st = nx_rt_nomem(lib->ctx, what, (size_t)w->ninst * sizeof in);
    }
    int to = epilogue ? map[w->stores[0].buf] : value;
    if (st == NX_OK && !nx_kernel_store(f, to, w->stores[0].value))
        st = nx_rt_error(lib->ctx, NX_ERR_INTERNAL, "%s: kernel %s: no store", what, lib->name);
    if (st == NX_OK)
        st = nx_kernel_validate(f);
    if (st != NX_OK) {
        nx_kernel_free(f);
        return st;
    }
    *out = f;
    return NX_OK;
}

/* lib with operand `op` computed by w: lib's buffers (operand op now a VALUE), then w's inputs;
 * w's body with its loads renumbered. NX_OK with *out NULL when the buffers do not fit. */
static nx_status fuse_pair(const nx_kernel *lib, int op, const nx_kernel *w, nx_kernel **out)
{
    *out = NULL;
    int map[NX_KERNEL_MAX_BUFFERS], nb = lib->nbufs;
    for (int b = 0; b < w->nbufs; b++)
        map[b] = w->bufs[b].role == NX_KBUF_IN ? nb++ : -1;
    if (nb > NX_KERNEL_MAX_BUFFERS)
        return NX_OK;
    return fuse_body(lib, op, w, map, nb, false, out);
}

static void drop_kernel(nx_kplan *p, int ki)
{
    nx_kernel_free(p->kernels[ki]);
    memmove(p->kernels + ki, p->kernels + ki + 1,
            (size_t)(p->nkernels - ki - 1) * sizeof *p->kernels);
    p->nkernels--;
}

/* Tries each operand of library kernel li; true when one was fused (the plan changed). */
static nx_status fuse_library(nx_kplan *p, int li, bool (*supports)(const nx_kernel *),
                              bool *fused)
{
    *fused = false;
    nx_kernel *lib = p->kernels[li];
    for (int op = 0; op < lib->nbufs; op++) {
        uint32_t slot = lib->bufs[op].slot;
        if (lib->bufs[op].role != NX_KBUF_IN || p->slots[slot].kind != NX_SLOT_TEMP ||
            is_output_slot(p, slot) || readers_of(p, slot) != 1)
            continue;
        int wi = writer_of(p, slot);
        if (wi < 0 || wi >= li || !prologue_shaped(p->kernels[wi]))
            continue;
        nx_kernel *f = NULL;
        nx_status st = fuse_pair(lib, op, p->kernels[wi], &f);
        if (st != NX_OK)
            return st;
        if (!f)
            continue;
        if (!supports(f)) {
            nx_kernel_free(f);
            continue;
        }
        nx_kernel_free(lib);
        p->kernels[li] = f;
        drop_kernel(p, wi);
        *fused = true;
        return NX_OK;
    }
    return NX_OK;
}

/* ---- epilogues -----------------------------------------------------------------------------*/

/* Slot `slot` is ready before kernel `at`: an input, a constant, or written by an earlier kernel. */
static bool ready_before(const nx_kplan *p, uint32_t slot, int at)
{
    if (p->slots[slot].kind != NX_SLOT_TEMP)
        return true;
    int w = writer_of(p, slot);
    return w >= 0 && w < at;
}

static void move_kernel(nx_kplan *p, int from, int to)
{
    nx_kernel *k = p->kernels[from];
    if (from > to)
        memmove(p->kernels + to + 1, p->kernels + to, (size_t)(from - to) * sizeof *p->kernels);
    else
        memmove(p->kernels + from, p->kernels + from + 1,
                (size_t)(to - from) * sizeof *p->kernels);
    p->kernels[to] = k;
}

/* Whether the writer of each input of e other than `skip` that is not ready before kernel li
 * has its own inputs ready there (so it can move up to just before li). */
static bool hoistable(const nx_kplan *p, int li, const nx_kernel *e, uint32_t skip)
{
    for (int b = 0; b < e->nbufs; b++) {
        uint32_t slot = e->bufs[b].slot;
        if (e->bufs[b].role != NX_KBUF_IN || slot == skip || ready_before(p, slot, li))
            continue;
        int w = writer_of(p, slot);
        if (w <= li)
            return false;
        const nx_kernel *wk = p->kernels[w];
        for (int c = 0; c < wk->nbufs; c++)
            if (wk->bufs[c].role == NX_KBUF_IN && !ready_before(p, wk->bufs[c].slot, li))
                return false;
    }
    return true;
}

/* Every input of e other than `skip` ready before kernel li, each kernel that writes one later
 * moved to just before li (hoistable said it can be: a slot's writer still precedes its readers,
 * so the order stays valid). Returns li's new index. */
static int hoist_inputs(nx_kplan *p, int li, const nx_kernel *e, uint32_t skip)
{
    for (int b = 0; b < e->nbufs; b++) {
        uint32_t slot = e->bufs[b].slot;
        if (e->bufs[b].role != NX_KBUF_IN || slot == skip || ready_before(p, slot, li))
            continue;
        move_kernel(p, writer_of(p, slot), li);
        li++;
    }
    return li;
}

/* lib, whose result (buffer res) only e reads, with e as its epilogue: lib's buffers (res now a
 * VALUE), e's output, e's other inputs; e's body with its loads renumbered. */
static nx_status fuse_epilogue(const nx_kernel *lib, int res, const nx_kernel *e, nx_kernel **out)
{
    *out = NULL;
    int map[NX_KERNEL_MAX_BUFFERS], nb = lib->nbufs;
    for (int b = 0; b < e->nbufs; b++)
        map[b] = e->bufs[b].role == NX_KBUF_IN && e->bufs[b].slot == lib->bufs[res].slot ? res
                                                                                         : nb++;
    if (nb > NX_KERNEL_MAX_BUFFERS)
        return NX_OK;
    return fuse_body(lib, res, e, map, nb, true, out);
}

/* The one kernel reading slot (through exactly one buffer), or -1. */
static int only_reader(const nx_kplan *p, uint32_t slot)
{
    int who = -1;
    for (int ki = 0; ki < p->nkernels; ki++) {
        const nx_kernel *k = p->kernels[ki];
        for (int b = 0; b < k->nbufs; b++)
            if (k->bufs[b].role == NX_KBUF_IN && k->bufs[b].slot == slot) {
                if (who >= 0)
                    return -1;
                who = ki;
            }
    }
    return who;
}

static nx_status epilogue_library(nx_kplan *p, int li, bool (*supports)(const nx_kernel *),
                                  bool *fused)
{
    *fused = false;
    const nx_kernel *lib = p->kernels[li];
    int res = -1;
    for (int b = 0; b < lib->nbufs; b++)
        res = lib->bufs[b].role == NX_KBUF_OUT ? b : res;
    if (res < 0)
        return NX_OK;
    uint32_t slot = lib->bufs[res].slot;
    if (p->slots[slot].kind != NX_SLOT_TEMP || is_output_slot(p, slot))
        return NX_OK;
    int ei = only_reader(p, slot);
    if (ei <= li || !prologue_shaped(p->kernels[ei]))
        return NX_OK;
    const nx_kernel *e = p->kernels[ei];
    nx_kernel *f = NULL;
    nx_status st = fuse_epilogue(lib, res, e, &f);
    if (st != NX_OK || !f)
        return st;
    if (!supports(f) || !hoistable(p, li, e, slot)) {
        nx_kernel_free(f);
        return NX_OK;
    }
    int at = hoist_inputs(p, li, e, slot);
    ei = only_reader(p, slot); /* the hoisting moved kernels before it, not after */
    nx_kernel_free(p->kernels[at]);
    p->kernels[at] = f;
    drop_kernel(p, ei);
    *fused = true;
    return NX_OK;
}

nx_status nx_prologue_fuse(nx_kplan *p, bool (*supports)(const nx_kernel *))
{
    if (!supports)
        return NX_OK;
    for (int ki = 0; ki < p->nkernels; ki++)
        if (!supports(p->kernels[ki]))
            return NX_OK;
    bool changed = false;
    for (int li = 0; li < p->nkernels; li++) {
        if (p->kernels[li]->kind != NX_KERNEL_LIBRARY || p->kernels[li]->has_prologue)
            continue;
        bool fused;
        nx_status st = fuse_library(p, li, supports, &fused);
        if (st != NX_OK)
            return st;
        if (fused) {
            li--; /* the writer came before it: the library kernel moved down by one */
            changed = true;
        }
    }
    for (int li = 0; li < p->nkernels; li++) {
        const nx_kernel *k = p->kernels[li];
        if (k->kind != NX_KERNEL_LIBRARY || k->has_prologue || k->has_epilogue)
            continue;
        bool fused;
        nx_status st = epilogue_library(p, li, supports, &fused);
        if (st != NX_OK)
            return st;
        changed = changed || fused;
    }
    if (changed) { /* kernels moved or merged: the slots' last readers anew */
        for (int s = 0; s < p->nslots; s++)
            p->slots[s].last_use = -1;
        for (int ki = 0; ki < p->nkernels; ki++) {
            const nx_kernel *k = p->kernels[ki];
            for (int b = 0; b < k->nbufs; b++)
                if (k->bufs[b].role == NX_KBUF_IN)
                    p->slots[k->bufs[b].slot].last_use = ki;
        }
    }
    return NX_OK;
}

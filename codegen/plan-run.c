/* One plan walk for every backend (plan-run.h). Slot lifetimes come from the plan: a temporary
 * is freed after its last reader unless it is a program output, which is handed over (or copied
 * when a later output names the same slot). */
#include "codegen/plan-run.h"
#include "runtime/tensor.h"

typedef struct walk {
    nx_ctx *ctx;
    const nx_kplan *p;
    const nx_plan_hooks *h;
    void *be;
    nx_tensor **slot; /* by slot */
} walk;

static bool is_output(const nx_kplan *p, int slot)
{
    for (int i = 0; i < p->noutputs; i++)
        if (p->outputs[i] == slot)
            return true;
    return false;
}

static bool borrowed(const walk *w, int slot)
{
    return w->h->borrow_inputs && w->p->slots[slot].kind == NX_SLOT_INPUT;
}

static nx_status bind_slots(walk *w, const nx_tensor *const *inputs)
{
    for (int i = 0; i < w->p->nslots; i++) {
        const nx_kslot *sl = &w->p->slots[i];
        if (sl->kind == NX_SLOT_TEMP)
            continue;
        if (borrowed(w, i)) {
            w->slot[i] = (nx_tensor *)inputs[sl->arg];
            continue;
        }
        nx_status st = w->h->bind(w->be, i, sl, &w->slot[i]);
        if (st != NX_OK)
            return st;
    }
    return NX_OK;
}

static nx_status run_kernel(walk *w, int ki)
{
    const nx_kernel *k = w->p->kernels[ki];
    for (int b = 0; b < k->nbufs; b++) {
        const nx_kbuf *kb = &k->bufs[b];
        if (kb->role != NX_KBUF_OUT || w->slot[kb->slot])
            continue;
        nx_status st = w->h->alloc(w->be, ki, k, b, &w->slot[kb->slot]);
        if (st != NX_OK)
            return st;
    }
    nx_status st = w->h->run(w->be, ki, k, w->slot);
    if (st != NX_OK)
        return st;
    for (int b = 0; b < k->nbufs; b++) {
        uint32_t sl = k->bufs[b].slot;
        const nx_kslot *ks = &w->p->slots[sl];
        if (ks->kind == NX_SLOT_TEMP && ks->last_use == ki && !is_output(w->p, (int)sl)) {
            nx_tensor_free(w->slot[sl]);
            w->slot[sl] = NULL;
        }
    }
    return NX_OK;
}

static nx_status take_outputs(walk *w, nx_tensor **outputs)
{
    const nx_kplan *p = w->p;
    for (int i = 0; i < p->noutputs; i++) {
        int sl = p->outputs[i];
        bool later = false; /* the same slot is also a later output: copy, do not hand over */
        for (int j = i + 1; j < p->noutputs; j++)
            later = later || p->outputs[j] == sl;
        bool moved = false;
        nx_status st = w->h->take(w->be, w->slot[sl], p->slots[sl].kind == NX_SLOT_TEMP && !later,
                                  &outputs[i], &moved);
        if (moved)
            w->slot[sl] = NULL;
        if (st != NX_OK)
            return st;
    }
    return NX_OK;
}

nx_status nx_plan_run(nx_ctx *ctx, const nx_kplan *p, const nx_plan_hooks *h, void *be,
                      const nx_tensor *const *inputs, nx_tensor **outputs)
{
    for (int i = 0; i < p->noutputs; i++)
        outputs[i] = NULL;
    size_t n = (size_t)p->nslots + 1;
    walk w = {ctx, p, h, be, nx_rt_calloc(ctx, n, sizeof(nx_tensor *))};
    if (!w.slot)
        return nx_rt_nomem(ctx, "nx_program_run (slots)", n * sizeof(nx_tensor *));
    nx_status st = bind_slots(&w, inputs);
    for (int ki = 0; st == NX_OK && ki < p->nkernels; ki++)
        st = run_kernel(&w, ki);
    if (st == NX_OK && h->sync)
        st = h->sync(be);
    if (st == NX_OK)
        st = take_outputs(&w, outputs);
    if (st == NX_OK && h->done)
        st = h->done(be);
    for (int i = 0; i < p->nslots; i++)
        if (!borrowed(&w, i))
            nx_tensor_free(w.slot[i]);
    nx_rt_free(ctx, w.slot, n * sizeof(nx_tensor *));
    if (st != NX_OK)
        for (int i = 0; i < p->noutputs; i++) {
            nx_tensor_free(outputs[i]);
            outputs[i] = NULL;
        }
    return st;
}

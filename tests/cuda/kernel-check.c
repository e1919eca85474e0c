/* Every kernel another test suite generates, through the CUDA backend.
 *
 * The ir-values suite and the graph fuzzer are rebuilt with nx_graph_compile and nx_program_run
 * renamed to the wrappers below (-D in tests/cuda/meson.build), so their own code runs unchanged.
 * The compile wrapper compiles as asked, then lowers the same outputs through the pass pipeline
 * and, for every kernel of the plan (loop and library kernels; each distinct kernel once):
 *   - emits CUDA C (reproducible and reassociating variants) and compiles it with NVRTC for
 *     compute_80 and compute_90 (PTX) and, where NVRTC offers it, sm_90 cubin (NVRTC's ptxas
 *     validates the code). Without NVRTC this part is skipped with a printed message; on a GPU
 *     it is left out, since every kernel is then compiled for the device itself.
 *   - on a machine with a usable GPU (NX_TEST_CUDA_RUN=1 and the device answering): compiles the
 *     plan for the device; the run wrapper then runs it on the same inputs as the reference
 *     interpreter and compares every output: integers and booleans exactly, floats within
 *     TOL_ULPS * eps of the output's largest magnitude (the CPU JIT's tolerance, test-lower.c),
 *     NaN where the reference has NaN.
 * A failure prints the kernel (and its CUDA C) and makes the process exit 1 at the end; a
 * summary line reports the counts. Kernels the backend does not support are counted as
 * fallbacks, not failures, and listed by reason. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/ptx/emit-lib.h"
#include "program/program.h"

nx_status cuda_check_compile(nx_graph *g, const nx_compile_opts *opts, nx_program **out);
nx_status cuda_check_run(nx_program *p, const nx_tensor *const *inputs, nx_tensor **outputs);

#define TOL_ULPS 64.0
#define MAX_SEEN 8192
#define MAX_PROGRAMS 4096
#define MAX_WHY 16

static struct {
    bool init, nvrtc, gpu, summary_registered;
    int64_t programs, kernels, library, distinct, nvrtc_ok, unsupported, failures, runs;
    int64_t outputs_checked;
    uint64_t seen[MAX_SEEN];
    int nseen;
    const char *why[MAX_WHY]; /* fallback reasons seen, with the op of the first and a count */
    char why_op[MAX_WHY][32];
    int64_t why_count[MAX_WHY];
    int nwhy;
} S;

typedef struct tracked {
    nx_program *prog;
    nx_ctx *ctx;
    nx_kplan *plan;
    nx_ptx_plan *cplan;
} tracked;
static tracked progs[MAX_PROGRAMS];

static void summary(void)
{
    printf("cuda kernel check: %lld programs, %lld kernels (%lld library, %lld distinct "
           "compiled), %lld NVRTC compiles passed, %lld kernels unsupported (fallback), %lld GPU "
           "runs with %lld outputs compared, %lld failures\n",
           (long long)S.programs, (long long)S.kernels, (long long)S.library,
           (long long)S.distinct, (long long)S.nvrtc_ok, (long long)S.unsupported,
           (long long)S.runs, (long long)S.outputs_checked, (long long)S.failures);
    for (int i = 0; i < S.nwhy; i++)
        printf("cuda kernel check: fallback x%lld (first: %s): %s\n", (long long)S.why_count[i],
               S.why_op[i], S.why[i]);
    fflush(stdout);
    if (S.failures)
        _exit(1);
}

static void init(nx_ctx *ctx)
{
    if (S.init)
        return;
    S.init = true;
    atexit(summary);
    S.nvrtc = nx_ptx_available(ctx) == NX_OK;
    if (!S.nvrtc)
        printf("cuda kernel check: SKIPPING the NVRTC compiles: %s\n", nx_ctx_last_error(ctx));
    const char *run = getenv("NX_TEST_CUDA_RUN");
    if (run && run[0] == '1') {
        S.gpu = nx_rt_cuda_available(ctx) == NX_OK;
        if (!S.gpu)
            printf("cuda kernel check: SKIPPING the GPU runs: %s\n", nx_ctx_last_error(ctx));
    }
}

static void failf(const char *fmt, ...) NX_PRINTF(1, 2);

static void failf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("cuda kernel check: FAIL: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    S.failures++;
}

static bool first_time(uint64_t h)
{
    for (int i = 0; i < S.nseen; i++)
        if (S.seen[i] == h)
            return false;
    if (S.nseen < MAX_SEEN)
        S.seen[S.nseen++] = h;
    return true;
}

static char *emit(nx_ctx *ctx, const nx_kernel *k, bool reassoc, size_t *len)
{
    char *src = NULL;
    nx_ptx_launch l;
    nx_status st = nx_ptx_kernel_emit(k, "nx_kernel", reassoc, &src, len, &l);
    if (st != NX_OK && st != NX_ERR_NOMEM)
        failf("emit %s: %s", k->name, nx_ctx_last_error(ctx));
    return st == NX_OK ? src : NULL;
}

/* compute_80 PTX, and sm_90 cubin where NVRTC lists sm_90 (compute_90 plus ptxas), else
 * compute_90 PTX. */
static void compile_src(nx_ctx *ctx, const nx_kernel *k, const char *src)
{
    const nx_rt_nvrtc *n = nx_rt_nvrtc_get();
    bool has90 = false;
    for (int i = 0; i < n->n_archs; i++)
        has90 = has90 || n->archs[i] == 90;
    nx_ptx_target ts[2] = {{80, NX_PTX_KIND_PTX},
                           {90, has90 ? NX_PTX_KIND_CUBIN : NX_PTX_KIND_PTX}};
    static const char *const opts[] = {"-default-device", "--std=c++17"};
    for (int t = 0; t < 2; t++) {
        nx_ptx_image img;
        nx_status st = nx_ptx_compile(ctx, src, "kernel-check.cu", ts[t], opts, 2, &img);
        if (st == NX_OK) {
            S.nvrtc_ok++;
            nx_ptx_image_free(ctx, &img);
        } else if (st != NX_ERR_NOMEM) {
            failf("NVRTC %s for %s_%d: %s\n--- kernel IR", k->name,
                  ts[t].kind == NX_PTX_KIND_CUBIN ? "sm" : "compute", ts[t].arch,
                  nx_ctx_last_error(ctx));
            nx_kernel_print(k, stdout);
            printf("--- CUDA C\n%s\n", src);
            return;
        }
    }
}

/* Both fold-order variants; the reassociating one only when its code differs. */
static void compile_one(nx_ctx *ctx, const nx_kernel *k)
{
    size_t la = 0, lb = 0;
    char *a = emit(ctx, k, false, &la), *b = emit(ctx, k, true, &lb);
    if (a)
        compile_src(ctx, k, a);
    if (a && b && strcmp(a, b) != 0)
        compile_src(ctx, k, b);
    nx_rt_free(ctx, a, la);
    nx_rt_free(ctx, b, lb);
}

/* Counts a kernel the device does not run under its reason (static strings: one per cause). */
static void tally(const nx_kernel *k, const char *why)
{
    S.unsupported++;
    int i = 0;
    while (i < S.nwhy && S.why[i] != why)
        i++;
    if (i == S.nwhy && S.nwhy < MAX_WHY) {
        S.why[S.nwhy] = why;
        snprintf(S.why_op[S.nwhy], sizeof S.why_op[0], "%s",
                 k->kind == NX_KERNEL_LIBRARY ? nx_ir_prim_name(k->lib_prim) : "loop");
        S.nwhy++;
    }
    if (i < MAX_WHY)
        S.why_count[i]++;
}

static void check_plan(nx_ctx *ctx, const nx_kplan *p)
{
    for (int i = 0; i < p->nkernels; i++) {
        const nx_kernel *k = p->kernels[i];
        S.kernels++;
        S.library += k->kind == NX_KERNEL_LIBRARY;
        const char *why = nx_ptx_kernel_unsupported(k);
        if (why) {
            tally(k, why);
            continue;
        }
        /* On a GPU every kernel is compiled for the device itself (track); the other
         * architectures are CI's job, which keeps the GPU run short. */
        if (!S.nvrtc || S.gpu || !first_time(nx_kernel_hash(k)))
            continue;
        S.distinct++;
        compile_one(ctx, k);
    }
}

static void track(nx_program *prog, nx_ctx *ctx, nx_kplan *plan)
{
    int which;
    if (!S.gpu || nx_ptx_plan_unsupported(plan, &which)) {
        nx_kplan_free(plan);
        return;
    }
    nx_ptx_plan *cp = NULL;
    nx_status st = nx_ptx_plan_compile(ctx, plan, &cp);
    if (st != NX_OK) {
        if (st != NX_ERR_NOMEM)
            failf("compiling a plan for the device: %s", nx_ctx_last_error(ctx));
        nx_kplan_free(plan);
        return;
    }
    for (int i = 0; i < MAX_PROGRAMS; i++)
        if (!progs[i].prog) {
            progs[i] = (tracked){prog, ctx, plan, cp};
            return;
        }
    nx_ptx_plan_free(ctx, cp);
    nx_kplan_free(plan);
}

nx_status cuda_check_compile(nx_graph *g, const nx_compile_opts *opts, nx_program **out)
{
    nx_status st = nx_graph_compile(g, opts, out);
    if (st != NX_OK || !opts || !g)
        return st;
    nx_ctx *ctx = g->s.ctx;
    init(ctx);
    S.programs++;
    char saved[512];
    snprintf(saved, sizeof saved, "%s", nx_ctx_last_error(ctx));
    nx_kplan *plan = NULL;
    if (nx_pass_pipeline(ctx, &g->s, opts->n_outputs, opts->outputs, &plan) == NX_OK) {
        check_plan(ctx, plan);
        track(*out, ctx, plan);
    }
    nx_rt_error(ctx, NX_OK, "%s", saved); /* the caller's view of the last error is unchanged */
    return st;
}

static double max_abs(const nx_tensor *t)
{
    double m = 0;
    for (int64_t i = 0; i < nx_tensor_numel(t); i++) {
        double v = fabs(nx_ir_get(nx_tensor_data(t), t->dtype, i).f);
        m = isfinite(v) && v > m ? v : m;
    }
    return m;
}

static void compare(const nx_tensor *got, const nx_tensor *want, int o)
{
    nx_tensor *w = NULL;
    if (nx_ir_tensor_contiguous_copy(nx_tensor_ctx(want), want, &w) != NX_OK)
        return;
    S.outputs_checked++;
    double tol = 0;
    if (nx_ir_is_float(w->dtype)) {
        double eps = w->dtype == NX_DTYPE_F32 ? 0x1p-23 : 0x1p-52;
        double scale = max_abs(w);
        tol = TOL_ULPS * eps * (scale > 1 ? scale : 1);
    }
    if (got->dtype != w->dtype || got->ndim != w->ndim ||
        memcmp(got->shape, w->shape, (size_t)w->ndim * sizeof *w->shape) != 0) {
        failf("output %d: geometry differs from the reference", o);
        nx_tensor_free(w);
        return;
    }
    for (int64_t i = 0; i < nx_tensor_numel(w); i++) {
        nx_ir_val x = nx_ir_get(nx_tensor_data(got), got->dtype, i);
        nx_ir_val y = nx_ir_get(nx_tensor_data(w), w->dtype, i);
        bool same = nx_ir_is_float(w->dtype)
                        ? (x.f == y.f) || (isnan(x.f) && isnan(y.f)) || fabs(x.f - y.f) <= tol
                        : x.i == y.i;
        if (!same) {
            failf("output %d element %lld: CUDA %.17g/%lld, reference %.17g/%lld (tol %g)", o,
                  (long long)i, x.f, (long long)x.i, y.f, (long long)y.i, tol);
            break;
        }
    }
    nx_tensor_free(w);
}

nx_status cuda_check_run(nx_program *p, const nx_tensor *const *inputs, nx_tensor **outputs)
{
    nx_status st = nx_program_run(p, inputs, outputs);
    tracked *t = NULL;
    for (int i = 0; i < MAX_PROGRAMS && !t; i++)
        if (progs[i].prog == p)
            t = &progs[i];
    if (st != NX_OK || !t)
        return st;
    char saved[512];
    snprintf(saved, sizeof saved, "%s", nx_ctx_last_error(t->ctx));
    nx_tensor *got[64] = {0};
    int n = t->plan->noutputs < 64 ? t->plan->noutputs : 64;
    nx_status cs = nx_ptx_plan_run(t->ctx, t->plan, t->cplan, inputs, got);
    S.runs++;
    if (cs == NX_OK)
        for (int o = 0; o < n; o++)
            compare(got[o], outputs[o], o);
    else if (cs != NX_ERR_NOMEM)
        failf("running on the device: %s", nx_ctx_last_error(t->ctx));
    if (S.failures && cs == NX_OK && S.failures < 4)
        nx_kplan_print(t->plan, stdout);
    for (int o = 0; o < n; o++)
        nx_tensor_free(got[o]);
    nx_rt_error(t->ctx, NX_OK, "%s", saved);
    return st;
}

/* Programs are freed by their owners; an entry whose program was freed could be matched by a
 * new program at the same address, so the wrapper forgets programs on free. */
void cuda_check_program_free(nx_program *p);
void cuda_check_program_free(nx_program *p)
{
    for (int i = 0; i < MAX_PROGRAMS; i++)
        if (p && progs[i].prog == p) {
            nx_ptx_plan_free(progs[i].ctx, progs[i].cplan);
            nx_kplan_free(progs[i].plan);
            progs[i].prog = NULL;
        }
    nx_program_free(p);
}

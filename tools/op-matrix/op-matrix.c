/* Generates docs/op-matrix.md and docs/op-matrix.json. The ops come from the op table itself
 * (nx_ops(): ops/ops.def rows joined with their descriptors' schemas, read at build time, so a
 * new row appears with nothing else to edit): name, family, summary, inputs, outputs, options,
 * differentiable, driver site and aliases; golden cases, their dtypes and the descriptor's
 * tolerances come from golden/ through the corpus (tests/fidelity/corpus.h) and nx_op_tolerance.
 * tools/op-matrix/facts.tsv keeps only what the table cannot know: per op a `note` row (the CUDA
 * status as measured, the tests beyond the golden replay, notes), the `op` rows of the ops not
 * on the table yet (legacy `nitrix run` rows), and one `entry` row per public entry point of the
 * op headers. The IR primitives come from ir/prims.def, reproducible-mode coverage from the
 * divergent-op registry.
 *
 *   op-matrix SRCROOT OUTDIR           writes OUTDIR/op-matrix.md and .json
 *   op-matrix SRCROOT OUTDIR --check   also fails when SRCROOT/docs/ differs (stale)
 * Either way it fails when a public entry point has no `entry` row, a legacy op has no `op` row,
 * or a facts row names an op that is neither a table row (or alias) nor a legacy op. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "corpus.h"
#include "nitrix-op.h"
#include "nitrix.h"

#define MAXR 160
#define CELL 512

typedef struct prim {
    const char *name, *adj, *sem;
} prim;
static const prim prims[] = {
#define NX_PRIM(ID, name, cls, arity, valops, rule, ref, attrs, adj, vjp, shape, sem)              \
    {name, #adj, sem},
#include "ir/prims.def"
#undef NX_PRIM
};

/* The CLI's legacy rows: `nitrix run` ops that are not rows of the op table yet. */
typedef struct cli_op {
    const char *name, *summary;
} cli_op;
static const cli_op cli_ops[] = {
#define NX_CLI_OP(name, inputs, n_outputs, summary) {#name, summary},
#define NX_CLI_OPT(op, name, type, def, allowed, help)
#include "tools/cli/ops.def"
#undef NX_CLI_OP
#undef NX_CLI_OPT
};

typedef struct fact {
    char f[9][CELL]; /* kind, name, then cells */
} fact;
static fact facts[MAXR];
static int n_facts, errors;

static void load_facts(const char *root)
{
    char path[1024], line[4096];
    snprintf(path, sizeof path, "%.900s/tools/op-matrix/facts.tsv", root);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "op-matrix: cannot open %s\n", path);
        exit(1);
    }
    while (fgets(line, sizeof line, f) && n_facts < MAXR) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        line[strcspn(line, "\n")] = 0;
        fact *r = &facts[n_facts++];
        char *p = line;
        for (int i = 0; i < 9 && p; i++) {
            char *tab = strchr(p, '\t');
            if (tab)
                *tab = 0;
            snprintf(r->f[i], CELL, "%.500s", p);
            p = tab ? tab + 1 : NULL;
        }
    }
    fclose(f);
}

static const fact *find_fact(const char *kind, const char *name)
{
    for (int i = 0; i < n_facts; i++) {
        if (!strcmp(facts[i].f[0], kind) && !strcmp(facts[i].f[1], name))
            return &facts[i];
    }
    return NULL;
}

/* The public op headers: nitrix-ops.h and the family headers it includes. */
static const char *const op_headers[] = {
    "nitrix-ops.h", "nitrix-morphology.h", "nitrix-sparse.h", "nitrix-smoothing.h",
    "nitrix-bilateral.h",
};
#define N_OP_HEADERS (int)(sizeof op_headers / sizeof op_headers[0])

/* Records the NX_API function names of one header in seen[]. */
static void scan_header(const char *root, const char *name, char seen[][96], int *n_seen)
{
    char path[1024], line[4096];
    snprintf(path, sizeof path, "%.900s/include/%s", root, name);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "op-matrix: cannot open %s\n", path);
        exit(1);
    }
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "NX_API ", 7))
            continue;
        char *paren = strchr(line, '(');
        if (!paren)
            continue;
        char *s = paren;
        while (s > line && (s[-1] == '_' || (s[-1] >= 'a' && s[-1] <= 'z') ||
                            (s[-1] >= '0' && s[-1] <= '9')))
            s--;
        snprintf(seen[*n_seen], 96, "%.*s", (int)(paren - s), s);
        if (!find_fact("entry", seen[*n_seen])) {
            fprintf(stderr, "op-matrix: public entry point %s (include/%s) has no `entry` row "
                            "in tools/op-matrix/facts.tsv\n", seen[*n_seen], name);
            errors++;
        }
        *n_seen += *n_seen < MAXR - 1;
    }
    fclose(f);
}

/* Every NX_API function of the op headers needs an entry row, and the reverse. */
static void check_entries(const char *root)
{
    char seen[MAXR][96];
    int n_seen = 0;
    for (int h = 0; h < N_OP_HEADERS; h++)
        scan_header(root, op_headers[h], seen, &n_seen);
    for (int i = 0; i < n_facts; i++) {
        bool found = strcmp(facts[i].f[0], "entry") != 0;
        for (int j = 0; j < n_seen && !found; j++)
            found = !strcmp(seen[j], facts[i].f[1]);
        if (!found) {
            fprintf(stderr, "op-matrix: facts.tsv names %s, which no op header declares\n",
                    facts[i].f[1]);
            errors++;
        }
    }
}

/* Whether golden/<family>/<case>/manifest.txt of some case says `op = <op>`. */
/* The facts row of an op: a `note` row (cuda, tested by, notes in f[2..4]) or an `op` row of the
 * older nine-column layout (its cuda, tested-by and notes cells are read; the others are the
 * table's now). A row may name the op by an alias. */
typedef struct op_note {
    const char *cuda, *tested, *notes;
} op_note;

static bool names_op(const fact *r, const nx_op_info *info)
{
    return info ? nx_op_find(r->f[1]) == info : false;
}

static op_note note_of(const nx_op_info *info, const char *name)
{
    for (int i = 0; i < n_facts; i++) {
        const fact *r = &facts[i];
        bool match = info ? names_op(r, info) : !strcmp(r->f[1], name);
        if (match && !strcmp(r->f[0], "note"))
            return (op_note){r->f[2], r->f[3], r->f[4]};
        if (match && !strcmp(r->f[0], "op"))
            return (op_note){r->f[5], r->f[7], r->f[8]};
    }
    return (op_note){"?", "?", "?"};
}

static const char *const opt_types[NX_OPT_TYPE_COUNT] = {
    "int", "ints", "float", "floats", "bool", "enum", "border", "dtype", "string", "semiring",
    "tensor"};

static const char *opt_type(const nx_op_opt *o)
{
    return (unsigned)o->type < NX_OPT_TYPE_COUNT ? opt_types[o->type] : "?";
}

/* One row of the Ops section: a table row (info) or a legacy op (fc). */
typedef struct op_row {
    const nx_op_info *info;
    const fact *fc;       /* legacy: its `op` row */
    const char *name, *math;
    int golden, f32, f64, fd; /* cases; of them float32, float64, float64 the FD test may use */
    op_note note;
    char repro[160], dtypes[32], tol[160];
} op_row;

static const gc_case *cases;
static int n_cases;

static void count_cases(op_row *r)
{
    const nx_op_desc *d = r->info ? nx_op_desc_find(r->info->name) : NULL;
    for (int c = 0; c < n_cases; c++) {
        const gc_case *k = &cases[c];
        if (k->err[0] || (d ? gc_desc(k) != d : strcmp(k->op, r->name) != 0))
            continue;
        r->golden++;
        r->f32 += !strcmp(k->dtype, "float32");
        r->f64 += !strcmp(k->dtype, "float64");
        r->fd += !strcmp(k->dtype, "float64") && !k->no_fd[0];
    }
    snprintf(r->dtypes, sizeof r->dtypes, "%s%s%s", r->f32 ? "f32" : "",
             r->f32 && r->f64 ? ", " : "", r->f64 ? "f64" : "");
    if (!r->golden)
        snprintf(r->dtypes, sizeof r->dtypes, "–");
    size_t o = 0;
    r->tol[0] = 0;
    static const struct {
        nx_dtype dt;
        const char *name;
    } dts[2] = {{NX_DTYPE_F32, "f32"}, {NX_DTYPE_F64, "f64"}};
    for (int i = 0; d && i < 2 && o < sizeof r->tol; i++) {
        double rt = 0, at = 0;
        if (!(i ? r->f64 : r->f32) || !nx_op_tolerance(d, dts[i].dt, NULL, NULL, &rt, &at))
            continue;
        o += (size_t)snprintf(r->tol + o, sizeof r->tol - o, "%s%s %g/%g", o ? "; " : "",
                              dts[i].name, rt, at);
    }
    if (!r->tol[0])
        snprintf(r->tol, sizeof r->tol, "–");
}

static const char *repro_cell(const char *site, char *buf, size_t len)
{
    size_t n;
    const nx_divergent_op *rows = nx_divergent_ops(&n);
    for (size_t i = 0; site && i < n; i++) {
        if (!strcmp(rows[i].op, site)) {
            snprintf(buf, len, "driver=%s (canonical) / %s (fast)", rows[i].canonical,
                     rows[i].fast);
            return buf;
        }
    }
    return "not divergent (one variant)";
}

/* Whether a facts row names a table op, a legacy CLI op, or (an `op` row) itself. */
static void check_fact_names(void)
{
    for (int i = 0; i < n_facts; i++) {
        if (strcmp(facts[i].f[0], "note"))
            continue;
        if (!nx_op_find(facts[i].f[1])) {
            fprintf(stderr, "op-matrix: facts.tsv has a note for %s, which is no row (or alias) "
                            "of ops/ops.def\n", facts[i].f[1]);
            errors++;
        }
    }
}

static int collect_ops(op_row *rows)
{
    size_t nt = 0;
    const nx_op_info *const *ops = nx_ops(&nt);
    int n = 0;
    for (size_t i = 0; i < nt; i++) {
        op_row *r = &rows[n++];
        *r = (op_row){.info = ops[i], .name = ops[i]->name, .math = ops[i]->summary};
        r->note = note_of(ops[i], NULL);
        char buf[160];
        snprintf(r->repro, sizeof r->repro, "%s", repro_cell(ops[i]->driver_site, buf, sizeof buf));
        count_cases(r);
    }
    /* legacy: the CLI's own rows, then facts `op` rows that name no table op */
    for (size_t i = 0; i < sizeof cli_ops / sizeof cli_ops[0]; i++) {
        if (nx_op_find(cli_ops[i].name))
            continue;
        rows[n++] = (op_row){.name = cli_ops[i].name, .math = cli_ops[i].summary};
    }
    for (int i = 0; i < n_facts; i++) {
        if (strcmp(facts[i].f[0], "op") || nx_op_find(facts[i].f[1]))
            continue;
        bool known = false;
        for (int j = 0; j < n && !known; j++)
            known = !rows[j].info && !strcmp(rows[j].name, facts[i].f[1]);
        if (!known)
            rows[n++] = (op_row){.name = facts[i].f[1], .math = "(no `nitrix run` row yet)"};
    }
    for (int i = 0; i < n; i++) {
        op_row *r = &rows[i];
        if (r->info)
            continue;
        r->fc = find_fact("op", r->name);
        if (!r->fc) {
            fprintf(stderr, "op-matrix: op %s is not on the op table and has no `op` row in "
                            "tools/op-matrix/facts.tsv\n", r->name);
            errors++;
        }
        r->note = note_of(NULL, r->name);
        char buf[160];
        snprintf(r->repro, sizeof r->repro, "%s", repro_cell(r->name, buf, sizeof buf));
        count_cases(r);
    }
    return n;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static const char *md_escape(const char *s, char *buf, size_t len)
{
    size_t o = 0;
    for (; *s && o + 2 < len; s++) {
        if (*s == '|')
            buf[o++] = '\\';
        buf[o++] = *s;
    }
    buf[o] = 0;
    return buf;
}

/* "a, b" from a list of names. */
/* v[nreq..n) are optional inputs, written `mask?`. */
static const char *join_opt(const char *const *v, int n, int nreq, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; v && i < n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s`%s%s`", i ? ", " : "", v[i],
                              i >= nreq ? "?" : "");
    return n && v ? buf : "–";
}

static const char *join(const char *const *v, int n, char *buf, size_t len)
{
    return join_opt(v, n, n, buf, len);
}

static const char *opts_cell(const nx_op_info *info, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < info->nopts && o < len; i++) {
        const nx_op_opt *p = &info->opts[i];
        if (p->def)
            o += (size_t)snprintf(buf + o, len - o, "%s`%s=%s`", i ? ", " : "", p->name,
                                  *p->def ? p->def : "\"\"");
        else
            o += (size_t)snprintf(buf + o, len - o, "%s`%s` (required)", i ? ", " : "", p->name);
    }
    return info->nopts ? buf : "–";
}

static const char *backends_cell(const op_row *r)
{
    const nx_op_desc *d = nx_op_desc_find(r->info->name);
    if (d && (d->flags & NX_OP_HOST))
        return "host (a runtime operation; golden replay through ref and cpu)";
    return r->golden ? "ref, cpu (golden replay on both)" : "ref, cpu";
}

static void gradient_cell(const op_row *r, char *buf, size_t len)
{
    if (!r->info->differentiable)
        snprintf(buf, len, "– (not differentiable)");
    else
        snprintf(buf, len, "yes: vjp, FD-checked on %d float64 golden case%s (`fd-gradients`)",
                 r->fd < 2 ? r->fd : 2, r->fd == 1 ? "" : "s");
}

static void write_md(FILE *f, const op_row *ops, int n)
{
    char a[CELL * 4], b[CELL * 2], c[CELL * 2], g[CELL], al[CELL];
    fputs("# Op matrix\n\n"
          "**Generated** by `tools/op-matrix` from the op table (`ops/ops.def` and each op's\n"
          "descriptor, through `nx_ops()`), `golden/`, `ir/prims.def`, the divergent-op registry\n"
          "and `tools/op-matrix/facts.tsv` (only what the table cannot know: CUDA status as\n"
          "measured, tests beyond the golden replay, notes, and the entry points). Do not edit by\n"
          "hand: edit the sources and rerun\n\n"
          "    meson compile -C <build> && <build>/tests/fidelity/op-matrix . docs\n\n"
          "The test `op-matrix-fresh` (suite `fidelity`) fails when this file is stale or when a\n"
          "public entry point of the op headers has no row in `facts.tsv`.\n\n"
          "Legend: *golden*: cases in `golden/` (docs/fidelity.md), replayed through\n"
          "`nx_op_call` on every available backend and compared by the descriptor's *tolerance*\n"
          "(rtol/atol per dtype); *dtypes*: the dtypes of those cases; *gradient*: the row's differentiable flag\n"
          "and the FD test on its float64 cases; *reproducible*: the op's driver variants under\n"
          "reproducible mode; **–**: none. Options show their defaults in the option's own\n"
          "syntax (`nitrix run OP --help` gives types, ranges and help).\n\n"
          "## Ops\n\n"
          "| op | family | math | inputs | outputs | options | dtypes | cpu | cuda | gradient | "
          "golden | tolerance | reproducible | aliases | tested by | notes |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
          f);
    for (int i = 0; i < n && ops[i].info; i++) {
        const op_row *r = &ops[i];
        const nx_op_info *in = r->info;
        int nal = 0;
        while (in->aliases && in->aliases[nal])
            nal++;
        gradient_cell(r, g, sizeof g);
        fprintf(f, "| `%s` | %s | %s | %s |", r->name, in->family,
                md_escape(r->math, a, sizeof a),
                join_opt(in->inputs, in->ninputs, in->nrequired, b, sizeof b));
        fprintf(f, " %s |", join(in->outputs, in->noutputs, b, sizeof b));
        fprintf(f, " %s |", md_escape(opts_cell(in, c, sizeof c), a, sizeof a));
        fprintf(f, " %s | %s | %s | %s |", r->dtypes, backends_cell(r),
                md_escape(r->note.cuda, a, sizeof a), g);
        if (r->golden)
            fprintf(f, " %d cases |", r->golden);
        else
            fputs(" – |", f);
        fprintf(f, " %s | %s | %s |", r->tol, r->repro, join(in->aliases, nal, al, sizeof al));
        fprintf(f, " %s |", md_escape(r->note.tested, a, sizeof a));
        fprintf(f, " %s |\n", md_escape(r->note.notes, a, sizeof a));
    }
    fputs("\n## Ops not on the op table yet\n\n"
          "Legacy `nitrix run` rows and public functions of families still converting to\n"
          "descriptors; their cells are `facts.tsv`'s `op` rows. Each moves to the table above\n"
          "when its `ops/ops.def` row lands.\n\n"
          "| op | math | f32 | f64 | cpu | cuda | gradient | golden | reproducible | tested by "
          "| notes |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
          f);
    for (int i = 0; i < n; i++) {
        const op_row *r = &ops[i];
        if (r->info)
            continue;
        const char *cells[9];
        for (int k = 0; k < 9; k++)
            cells[k] = r->fc ? r->fc->f[k] : "?";
        fprintf(f, "| `%s` | %s | %s | %s | %s | %s | %s | ", r->name,
                md_escape(r->math, a, sizeof a), cells[2], cells[3], cells[4], cells[5],
                cells[6]);
        if (r->golden)
            fprintf(f, "%d cases |", r->golden);
        else
            fputs("– |", f);
        fprintf(f, " %s | %s | %s |\n", r->repro, cells[7], cells[8]);
    }
    fputs("\n## Public entry points\n\nEvery `NX_API` function of the op headers "
          "(`include/nitrix-ops.h` and its family headers) and the op it computes (– for\n"
          "builders and helpers).\n\n| entry point | op |\n|---|---|\n",
          f);
    for (int i = 0; i < n_facts; i++) {
        if (!strcmp(facts[i].f[0], "entry"))
            fprintf(f, "| `%s` | %s |\n", facts[i].f[1],
                    strcmp(facts[i].f[2], "-") ? facts[i].f[2] : "–");
    }
    fputs("\n## Graph primitives\n\n"
          "Every primitive of the graph IR (`ir/prims.def`), with its semantics in one line (the\n"
          "full reference is [ir.md](ir.md)). `ref` is the reference interpreter, checked against\n"
          "NumPy/SciPy float64 fixtures in `tests/ir-values` (known failures in\n"
          "`tests/ir-values/known-failures.txt`). `cpu`: the same cases run on the CPU backend\n"
          "(`ir-values-cpu`, canonical and reassociated folds); sort, scan, scatter, extern and\n"
          "custom reductions run there as library kernels in C, and the few kernels the JIT cannot\n"
          "compile (f16/bf16 casts, atan2, integer pow) on the kernel interpreter with a warning.\n"
          "`cuda`: **compiles**: every case's kernels are emitted as CUDA C and compiled by NVRTC\n"
          "in CI (`cuda-kernels-ir-values`); not yet checked on a GPU against the interpreter.\n"
          "*adjoint*: the `adj` flag of the row.\n\n"
          "| primitive | semantics | ref | cpu | cuda | adjoint |\n|---|---|---|---|---|---|\n",
          f);
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
        fprintf(f, "| `%s` | %s | yes | yes | compiles | %s |\n", prims[i].name,
                md_escape(prims[i].sem, a, sizeof a),
                !strcmp(prims[i].adj, "NX_ADJ_SLOT")    ? "yes"
                : !strcmp(prims[i].adj, "NX_ADJ_FLOAT") ? "float only"
                                                        : "none");
}

static void json_list(FILE *f, const char *const *v, int n)
{
    fputc('[', f);
    for (int i = 0; v && i < n; i++) {
        if (i)
            fputs(", ", f);
        json_str(f, v[i]);
    }
    fputc(']', f);
}

static void json_table_op(FILE *f, const op_row *r)
{
    const nx_op_info *in = r->info;
    const nx_op_desc *d = nx_op_desc_find(in->name);
    int nal = 0;
    while (in->aliases && in->aliases[nal])
        nal++;
    fputs("    {\"op\": ", f);
    json_str(f, r->name);
    fputs(", \"on_table\": true, \"family\": ", f);
    json_str(f, in->family);
    fputs(", \"math\": ", f);
    json_str(f, r->math);
    fputs(", \"inputs\": ", f);
    json_list(f, in->inputs, in->ninputs);
    fprintf(f, ", \"required_inputs\": %d", in->nrequired);
    fputs(", \"outputs\": ", f);
    json_list(f, in->outputs, in->noutputs);
    fputs(", \"options\": [", f);
    for (int i = 0; i < in->nopts; i++) {
        fputs(i ? ", {\"name\": " : "{\"name\": ", f);
        json_str(f, in->opts[i].name);
        fputs(", \"type\": ", f);
        json_str(f, opt_type(&in->opts[i]));
        fputs(", \"default\": ", f);
        if (in->opts[i].def)
            json_str(f, in->opts[i].def);
        else
            fputs("null", f);
        fputc('}', f);
    }
    fprintf(f, "], \"differentiable\": %s, \"driver_site\": ",
            in->differentiable ? "true" : "false");
    if (in->driver_site)
        json_str(f, in->driver_site);
    else
        fputs("null", f);
    fputs(", \"aliases\": ", f);
    json_list(f, in->aliases, nal);
    fprintf(f, ", \"host\": %s, \"golden_cases\": %d, \"golden_float32\": %d, "
               "\"golden_float64\": %d, \"tolerance\": {",
            d && (d->flags & NX_OP_HOST) ? "true" : "false", r->golden, r->f32, r->f64);
    bool first = true;
    for (int i = 0; d && i < 2; i++) {
        double rt = 0, at = 0;
        nx_dtype dt = i ? NX_DTYPE_F64 : NX_DTYPE_F32;
        if (!(i ? r->f64 : r->f32) || !nx_op_tolerance(d, dt, NULL, NULL, &rt, &at))
            continue;
        fprintf(f, "%s\"%s\": {\"rtol\": %g, \"atol\": %g}", first ? "" : ", ",
                i ? "float64" : "float32", rt, at);
        first = false;
    }
    fputs("}, \"reproducible\": ", f);
    json_str(f, r->repro);
    fputs(", \"cuda\": ", f);
    json_str(f, r->note.cuda);
    fputs(", \"tested_by\": ", f);
    json_str(f, r->note.tested);
    fputs(", \"notes\": ", f);
    json_str(f, r->note.notes);
    fputc('}', f);
}

static void write_json(FILE *f, const op_row *ops, int n)
{
    static const char *keys[] = {"",     "",         "f32",       "f64",  "cpu",
                                 "cuda", "gradient", "tested_by", "notes"};
    fputs("{\n  \"ops\": [\n", f);
    for (int i = 0; i < n; i++) {
        if (ops[i].info) {
            json_table_op(f, &ops[i]);
        } else {
            fputs("    {\"op\": ", f);
            json_str(f, ops[i].name);
            fputs(", \"on_table\": false, \"math\": ", f);
            json_str(f, ops[i].math);
            for (int k = 2; k < 9; k++) {
                fprintf(f, ", \"%s\": ", keys[k]);
                json_str(f, ops[i].fc ? ops[i].fc->f[k] : "?");
            }
            fprintf(f, ", \"golden_cases\": %d, \"reproducible\": ", ops[i].golden);
            json_str(f, ops[i].repro);
            fputc('}', f);
        }
        fprintf(f, "%s\n", i + 1 < n ? "," : "");
    }
    fputs("  ],\n  \"entry_points\": {", f);
    bool first = true;
    for (int i = 0; i < n_facts; i++) {
        if (strcmp(facts[i].f[0], "entry"))
            continue;
        fprintf(f, "%s\n    ", first ? "" : ",");
        json_str(f, facts[i].f[1]);
        fputs(": ", f);
        if (strcmp(facts[i].f[2], "-"))
            json_str(f, facts[i].f[2]);
        else
            fputs("null", f);
        first = false;
    }
    fputs("\n  },\n  \"primitives\": [\n", f);
    size_t np = sizeof prims / sizeof prims[0];
    for (size_t i = 0; i < np; i++) {
        fputs("    {\"primitive\": ", f);
        json_str(f, prims[i].name);
        fputs(", \"semantics\": ", f);
        json_str(f, prims[i].sem);
        fputs(", \"ref\": true, \"cpu\": false, \"cuda\": false, \"adjoint\": ", f);
        json_str(f, prims[i].adj);
        fprintf(f, "}%s\n", i + 1 < np ? "," : "");
    }
    fputs("  ]\n}\n", f);
}

static bool same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF || cb == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}


int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: op-matrix SRCROOT OUTDIR [--check]\n");
        return 2;
    }
    load_facts(argv[1]);
    check_entries(argv[1]);
    check_fact_names();
    gc_case *all = NULL;
    n_cases = gc_cases(&all);
    if (n_cases < 0) {
        fprintf(stderr, "op-matrix: cannot read the golden corpus under %s\n", gc_root());
        return 1;
    }
    cases = all;
    static op_row ops[MAXR * 2];
    int n = collect_ops(ops);
    const char *names[2] = {"op-matrix.md", "op-matrix.json"};
    for (int k = 0; k < 2; k++) {
        char out[1024], doc[1024];
        snprintf(out, sizeof out, "%.900s/%s", argv[2], names[k]);
        FILE *f = fopen(out, "w");
        if (!f) {
            fprintf(stderr, "op-matrix: cannot write %s\n", out);
            free(all);
            return 1;
        }
        (k ? write_json : write_md)(f, ops, n);
        fclose(f);
        snprintf(doc, sizeof doc, "%.900s/docs/%s", argv[1], names[k]);
        if (argc > 3 && !strcmp(argv[3], "--check") && !same_file(out, doc)) {
            fprintf(stderr, "op-matrix: docs/%s is stale: rerun `<build>/tests/fidelity/op-matrix "
                            ". docs` from the source root and commit it (diff %s %s)\n",
                    names[k], doc, out);
            errors++;
        }
    }
    size_t nt = 0;
    nx_ops(&nt);
    printf("op-matrix: %d ops (%zu on the op table), %zu primitives, %d errors\n", n, nt,
           sizeof prims / sizeof prims[0], errors);
    free(all);
    return errors ? 1 : 0;
}

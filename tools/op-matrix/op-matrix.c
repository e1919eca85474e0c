/* Generates docs/op-matrix.md and docs/op-matrix.json from the op tables: ir/prims.def (the IR
 * primitives), tools/cli/ops.def (the `nitrix run` ops), include/nitrix-ops.h (the public entry
 * points), tools/op-matrix/facts.tsv (the hand-kept cells), golden/ (which ops have golden cases)
 * and the divergent-op registry (reproducible-mode coverage).
 *
 *   op-matrix SRCROOT OUTDIR           writes OUTDIR/op-matrix.md and .json
 *   op-matrix SRCROOT OUTDIR --check   also fails when SRCROOT/docs/ differs (stale)
 * Either way it fails when a public entry point or a `nitrix run` op has no facts row. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nitrix.h"

#define MAXR 128
#define CELL 512

typedef struct prim {
    const char *name, *adj, *sem;
} prim;
static const prim prims[] = {
#define NX_PRIM(ID, name, arity, valops, rule, ref, attrs, adj, vjp, shape, sem) {name, #adj, sem},
#include "ir/prims.def"
#undef NX_PRIM
};

typedef struct cli_op {
    const char *name, *summary;
} cli_op;
static const cli_op cli_ops[] = {
/* The library's op table first (`nitrix run` consults it first), then the CLI's legacy rows. */
#define NX_OP(name, family, inputs, outputs, diff, driver, summary) {#name, summary},
#include "ops/ops.def"
#undef NX_OP
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
static int golden_cases(const char *root, const char *op)
{
    char path[1024], want[128], line[512];
    snprintf(path, sizeof path, "%.900s/golden", root);
    snprintf(want, sizeof want, "op = %.100s\n", op);
    int n = 0;
    DIR *top = opendir(path);
    for (struct dirent *fam; top && (fam = readdir(top));) {
        if (fam->d_name[0] == '.' || fam->d_type != DT_DIR)
            continue;
        char fdir[1300];
        snprintf(fdir, sizeof fdir, "%s/%.255s", path, fam->d_name);
        DIR *d = opendir(fdir);
        for (struct dirent *c; d && (c = readdir(d));) {
            char m[1600];
            snprintf(m, sizeof m, "%s/%.255s/manifest.txt", fdir, c->d_name);
            FILE *f = c->d_name[0] != '.' ? fopen(m, "r") : NULL;
            while (f && fgets(line, sizeof line, f))
                n += strcmp(line, want) == 0;
            if (f)
                fclose(f);
        }
        if (d)
            closedir(d);
    }
    if (top)
        closedir(top);
    return n;
}

static const char *repro_cell(const char *op, char *buf, size_t len)
{
    size_t n;
    const nx_divergent_op *rows = nx_divergent_ops(&n);
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(rows[i].op, op)) {
            snprintf(buf, len, "driver=%s (canonical) / %s (fast)", rows[i].canonical,
                     rows[i].fast);
            return buf;
        }
    }
    return "not divergent (one variant)";
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
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

typedef struct op_row {
    const char *name, *math;
    const fact *fc;
    int golden;
    char repro[128];
} op_row;

static int collect_ops(const char *root, op_row *rows)
{
    int n = 0;
    for (size_t i = 0; i < sizeof cli_ops / sizeof cli_ops[0]; i++)
        rows[n++] = (op_row){cli_ops[i].name, cli_ops[i].summary, NULL, 0, ""};
    for (int i = 0; i < n_facts; i++) {
        bool known = strcmp(facts[i].f[0], "op") != 0;
        for (int j = 0; j < n && !known; j++)
            known = !strcmp(rows[j].name, facts[i].f[1]);
        if (!known)
            rows[n++] = (op_row){facts[i].f[1], "(no `nitrix run` row yet)", NULL, 0, ""};
    }
    for (int i = 0; i < n; i++) {
        rows[i].fc = find_fact("op", rows[i].name);
        if (!rows[i].fc) {
            fprintf(stderr, "op-matrix: op %s has no `op` row in tools/op-matrix/facts.tsv\n",
                    rows[i].name);
            errors++;
        }
        rows[i].golden = golden_cases(root, rows[i].name);
        char buf[128];
        snprintf(rows[i].repro, sizeof rows[i].repro, "%s",
                 repro_cell(rows[i].name, buf, sizeof buf));
    }
    return n;
}

static const char *cell(const op_row *r, int i)
{
    return r->fc ? r->fc->f[i] : "?";
}

static void write_md(FILE *f, const op_row *ops, int n)
{
    char a[CELL * 2];
    fputs("# Op matrix\n\n"
          "**Generated** by `tools/op-matrix` from `ir/prims.def`, `tools/cli/ops.def`,\n"
          "`include/nitrix-ops.h` and the family headers it includes, `tools/op-matrix/facts.tsv`,\n"
          "`golden/` and the divergent-op registry. Do not edit by hand: edit the sources and\n"
          "rerun\n\n"
          "    meson compile -C <build> && <build>/tests/fidelity/op-matrix . docs\n\n"
          "The test `op-matrix-fresh` (suite `fidelity`) fails when this file is stale or when a\n"
          "public entry point of the op headers has no row in `facts.tsv`.\n\n"
          "Legend: **yes**: runs there and is tested against an independent oracle; **–**: not\n"
          "available (a request falls back to `ref` with a warning, or fails under\n"
          "`NITRIX_STRICT_BACKEND=1`); **host**: a runtime operation on host tensors, not a compiled\n"
          "kernel. *golden*: cases in `golden/` (docs/fidelity.md), replayed on every backend.\n"
          "*reproducible*: the op's driver variants under reproducible mode.\n\n"
          "## Ops\n\n"
          "| op | math | f32 | f64 | cpu | cuda | gradient | golden | reproducible | tested by "
          "| notes |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
          f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "| `%s` | %s | %s | %s | %s | %s | %s | ", ops[i].name,
                md_escape(ops[i].math, a, sizeof a), cell(&ops[i], 2), cell(&ops[i], 3),
                cell(&ops[i], 4), cell(&ops[i], 5), cell(&ops[i], 6));
        if (ops[i].golden)
            fprintf(f, "%d cases |", ops[i].golden);
        else
            fputs("– |", f);
        fprintf(f, " %s | %s | %s |\n", ops[i].repro, cell(&ops[i], 7), cell(&ops[i], 8));
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

static void write_json(FILE *f, const op_row *ops, int n)
{
    static const char *keys[] = {"",     "",         "f32",       "f64",  "cpu",
                                 "cuda", "gradient", "tested_by", "notes"};
    fputs("{\n  \"ops\": [\n", f);
    for (int i = 0; i < n; i++) {
        fputs("    {\"op\": ", f);
        json_str(f, ops[i].name);
        fputs(", \"math\": ", f);
        json_str(f, ops[i].math);
        for (int k = 2; k < 9; k++) {
            fprintf(f, ", \"%s\": ", keys[k]);
            json_str(f, cell(&ops[i], k));
        }
        fprintf(f, ", \"golden_cases\": %d, \"reproducible\": ", ops[i].golden);
        json_str(f, ops[i].repro);
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
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
    static op_row ops[MAXR * 2];
    int n = collect_ops(argv[1], ops);
    const char *names[2] = {"op-matrix.md", "op-matrix.json"};
    for (int k = 0; k < 2; k++) {
        char out[1024], doc[1024];
        snprintf(out, sizeof out, "%.900s/%s", argv[2], names[k]);
        FILE *f = fopen(out, "w");
        if (!f) {
            fprintf(stderr, "op-matrix: cannot write %s\n", out);
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
    printf("op-matrix: %d ops, %zu primitives, %d errors\n", n, sizeof prims / sizeof prims[0],
           errors);
    return errors ? 1 : 0;
}

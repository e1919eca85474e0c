/* The median of a small window as a selection network: Batcher's odd-even merge sort over the
 * window's values (one shifted slice of the padded image per window place), written as IR
 * elementwise minimum/maximum. Only the comparators the middle output depends on reach the
 * compiled program (compilation keeps the outputs' subgraph), so the network is pruned for free,
 * and the whole filter is one fused, vectorised loop instead of a sort per voxel.
 *
 * NaN: numpy sorts NaN last, and minimum/maximum propagate it, so the network runs on NaN
 * replaced by +inf; the rank-r element is NaN exactly when at least count - r of the window's
 * values are NaN (they fill the top places), which a count of NaNs per window decides. */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "ir/ir.h"
#include "morph.h"
#include "nitrix-graph.h"

/* Compare-exchange of wires i < j: the smaller value to i. NX_NONE stands for +inf (the padding
 * wires above count), so comparators with it fold away. */
static void exchange(nx_graph *g, nx_node *w, int i, int j)
{
    if (!w[j])
        return; /* min(a, inf) = a stays at i, inf stays at j */
    if (!w[i]) {
        w[i] = w[j];
        w[j] = NX_NONE;
        return;
    }
    nx_node lo = nx_minimum(g, w[i], w[j]), hi = nx_maximum(g, w[i], w[j]);
    w[i] = lo;
    w[j] = hi;
}

/* Batcher's odd-even merge sort of n = 2^p wires (Knuth 5.3.4, algorithm M's comparator order). */
static void odd_even_sort(nx_graph *g, nx_node *w, int n)
{
    for (int p = 1; p < n; p <<= 1)
        for (int k = p; k >= 1; k >>= 1)
            for (int j = k % p; j + k < n; j += 2 * k)
                for (int i = 0; i < k && i + j + k < n; i++)
                    if ((i + j) / (2 * p) == (i + j + k) / (2 * p))
                        exchange(g, w, i + j, i + j + k);
}

nx_node nx_morph_select_rank(nx_graph *g, int count, const nx_node *values, int rank)
{
    if (count < 1 || count > NX_MORPH_NET_MAX || rank < 0 || rank >= count)
        return nx_ir_graph_failf(g, NX_ERR_INTERNAL,
                                 "median network: %d values, rank %d; expected 1..%d values",
                                 count, rank, NX_MORPH_NET_MAX);
    nx_dtype dt = nx_node_dtype(g, values[0]);
    nx_node inf = nx_scalar(g, dt, INFINITY), one = nx_scalar(g, dt, 1), zero = nx_scalar(g, dt, 0);
    nx_node w[NX_MORPH_NET_MAX] = {0}, nans = NX_NONE;
    int n = 1;
    while (n < count)
        n <<= 1;
    for (int i = 0; i < count; i++) {
        nx_node isnan_i = nx_isnan(g, values[i]);
        w[i] = nx_select(g, isnan_i, inf, values[i]);
        nx_node c = nx_select(g, isnan_i, one, zero);
        nans = i ? nx_add(g, nans, c) : c;
    }
    odd_even_sort(g, w, n);
    nx_node y = w[rank] ? w[rank] : inf;
    nx_node is_nan = nx_ge(g, nans, nx_scalar(g, dt, (double)(count - rank)));
    return nx_select(g, is_nan, nx_scalar(g, dt, NAN), y);
}

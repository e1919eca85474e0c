"""Classification evaluation: roc_auc and confusion_matrix against scikit-learn 1.3
(roc_auc_score, its average ranks on ties; confusion_matrix with labels=range(C)); topk_accuracy
against a NumPy stable argsort of the negated logits (ties to the lower class index, the op's
documented rule), checked against sklearn.metrics.top_k_accuracy_score where no logits tie.

Where scikit-learn raises (a class with no positive or no negative sample), the expected value is
the op's documented NaN.
"""
import numpy as np
from sklearn.metrics import confusion_matrix, roc_auc_score, top_k_accuracy_score
from sklearn.preprocessing import label_binarize

PREFIX = "classeval_"


def _auc_cols(scores, pos):
    """Per column: sklearn's AUC, NaN where a column has a single class."""
    out = []
    for c in range(scores.shape[1]):
        y = pos[:, c]
        out.append(roc_auc_score(y, scores[:, c]) if 0 < y.sum() < y.size else np.nan)
    return np.array(out)


def roc_cases(rng):
    base = dict(op="roc_auc", sklearn=True)
    gen = "sklearn.metrics.roc_auc_score"
    for dt in (np.float32, np.float64):
        t = np.dtype(dt).name
        # binary, continuous scores
        s = rng.standard_normal(60).astype(dt)
        y = (rng.uniform(size=60) < 0.4).astype(np.int64)
        y[:2] = [0, 1]
        yield dict(base, dtype=dt, name=f"{PREFIX}roc_auc_binary_{t}",
                   inputs=[("scores.npy", s), ("labels.npy", y)],
                   outputs=[("out.npy", np.array(roc_auc_score(y, s.astype(np.float64)), dt))],
                   generator=gen)
        # binary with many ties (scores on a coarse grid), bool labels
        s = (np.round(rng.uniform(size=80) * 5) / 5).astype(dt)
        yb = rng.uniform(size=80) < 0.5
        yield dict(base, dtype=dt, name=f"{PREFIX}roc_auc_binary_ties_{t}",
                   inputs=[("scores.npy", s), ("labels.npy", yb)],
                   outputs=[("out.npy", np.array(roc_auc_score(yb, s.astype(np.float64)), dt))],
                   generator=gen + " (tied scores: average ranks)")
        # multilabel, every average
        n, C = 50, 4
        s = np.round(rng.standard_normal((n, C)), 1).astype(dt)
        y = (rng.uniform(size=(n, C)) < np.array([0.2, 0.4, 0.5, 0.7])).astype(np.int32)
        s64 = s.astype(np.float64)
        for avg in ("macro", "weighted", "micro", "none"):
            want = roc_auc_score(y, s64, average=None if avg == "none" else avg)
            yield dict(base, dtype=dt, name=f"{PREFIX}roc_auc_multilabel_{avg}_{t}",
                       inputs=[("scores.npy", s), ("labels.npy", y)],
                       options=[("average", avg)],
                       outputs=[("out.npy", np.asarray(want).astype(dt))],
                       generator=gen + f" (multilabel, average={avg})")
        # multiclass one-vs-rest: probabilities and class indices
        n, C = 70, 3
        z = rng.standard_normal((n, C))
        p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        p = p.astype(dt)
        lab = rng.randint(0, C, size=n).astype(np.int64)
        # sklearn checks the rows sum to 1 (np.allclose); give it the f64 copy of the f32 values
        p64 = p.astype(np.float64)
        for avg in ("macro", "weighted", "micro", "none"):
            want = roc_auc_score(lab, p64, multi_class="ovr",
                                 average=None if avg == "none" else avg)
            if avg == "micro":
                assert np.isclose(want, roc_auc_score(label_binarize(lab, classes=range(C)), p64,
                                                      average="micro"))
            yield dict(base, dtype=dt, name=f"{PREFIX}roc_auc_multiclass_{avg}_{t}",
                       inputs=[("scores.npy", p), ("labels.npy", lab)],
                       options=[("average", avg)],
                       outputs=[("out.npy", np.asarray(want).astype(dt))],
                       generator=gen + f" (multi_class=ovr, average={avg})")
    # single-class label sets: NaN by the op's rule (sklearn raises)
    s = rng.standard_normal(10)
    yield dict(base, dtype=np.float64, name=f"{PREFIX}roc_auc_single_class_float64",
               inputs=[("scores.npy", s), ("labels.npy", np.ones(10, np.int64))],
               outputs=[("out.npy", np.array(np.nan))],
               generator="the op's documented rule: one class present gives NaN")
    s = rng.standard_normal((30, 3))
    y = (rng.uniform(size=(30, 3)) < 0.5).astype(np.float64)
    y[:, 1] = 0
    want = _auc_cols(s, y)
    assert np.isnan(want[1]) and not np.isnan(want[0])
    yield dict(base, dtype=np.float64, name=f"{PREFIX}roc_auc_single_class_none_float64",
               inputs=[("scores.npy", s), ("labels.npy", y)], options=[("average", "none")],
               outputs=[("out.npy", want)],
               generator=gen + " per column; NaN for the column with no positive (op's rule)")


def confusion_cases(rng):
    for dt in (np.int32, np.int64):
        t = np.dtype(dt).name
        C = 5
        target = rng.randint(0, C, size=120).astype(dt)
        pred = np.where(rng.uniform(size=120) < 0.6, target,
                        rng.randint(0, C, size=120)).astype(dt)
        want = confusion_matrix(target, pred, labels=list(range(C))).astype(np.int64)
        yield dict(op="confusion_matrix", dtype=np.int64, sklearn=True,
                   name=f"{PREFIX}confusion_matrix_{t}",
                   inputs=[("pred.npy", pred), ("target.npy", target)],
                   options=[("num_classes", str(C))], outputs=[("out.npy", want)],
                   generator="sklearn.metrics.confusion_matrix(target, pred, labels=range(C))")
    # 2-D label maps, a class present in neither (an all-zero row and column), u8 labels
    C = 6
    target = rng.randint(0, 4, size=(8, 9)).astype(np.uint8)
    pred = rng.randint(0, 5, size=(8, 9)).astype(np.uint8)
    want = confusion_matrix(target.ravel(), pred.ravel(), labels=list(range(C)))
    assert not want[5].any() and not want[:, 5].any()
    yield dict(op="confusion_matrix", dtype=np.int64, sklearn=True,
               name=f"{PREFIX}confusion_matrix_map_uint8",
               inputs=[("pred.npy", pred), ("target.npy", target)],
               options=[("num_classes", str(C))], outputs=[("out.npy", want.astype(np.int64))],
               generator="sklearn.metrics.confusion_matrix on the raveled maps, labels=range(C)")


def _topk_hits(logits, labels, k):
    order = np.argsort(-logits, axis=-1, kind="stable")[..., :k]
    return (order == labels[..., None]).any(axis=-1).astype(np.float64)


def topk_cases(rng):
    gen = "numpy stable argsort of -logits (ties: lower index), label among the first k"
    for dt in (np.float32, np.float64):
        t = np.dtype(dt).name
        n, C = 40, 6
        x = rng.standard_normal((n, C)).astype(dt)
        y = rng.randint(0, C, size=n).astype(np.int64)
        for k, red in ((1, "none"), (2, "mean"), (3, "sum")):
            hits = _topk_hits(x.astype(np.float64), y, k)
            # no ties in these logits: scikit-learn agrees
            assert np.isclose(hits.mean(), top_k_accuracy_score(y, x, k=k, labels=range(C)))
            want = {"none": hits, "mean": hits.mean(), "sum": hits.sum()}[red]
            yield dict(op="topk_accuracy", dtype=dt, name=f"{PREFIX}topk_k{k}_{red}_{t}",
                       inputs=[("logits.npy", x), ("labels.npy", y)],
                       options=[("k", str(k)), ("reduction", red)],
                       outputs=[("out.npy", np.asarray(want).astype(dt))],
                       generator=gen + "; checked against sklearn top_k_accuracy_score")
    # tied logits, batch axes [2, 7], i32 labels
    x = np.round(rng.standard_normal((2, 7, 5)))
    y = rng.randint(0, 5, size=(2, 7)).astype(np.int32)
    yield dict(op="topk_accuracy", dtype=np.float64, name=f"{PREFIX}topk_ties_batch_float64",
               inputs=[("logits.npy", x), ("labels.npy", y)], options=[("k", "2")],
               outputs=[("out.npy", _topk_hits(x, y, 2))], generator=gen)


def cases(rng):
    yield from roc_cases(rng)
    yield from confusion_cases(rng)
    yield from topk_cases(rng)

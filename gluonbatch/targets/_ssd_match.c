/* gluoncv's SSD matching on MXNet's float32 IoUs, compiled: see ssd.py's ssd_match, the
 * definition this computes the same answer as, for finite boxes of finite area and anchors
 * of positive finite area (every IoU then finite, in [0, 1]).
 *
 * Per sample: the IoU of each real box with every anchor (MXNet's box_iou arithmetic in
 * float32, built with -ffp-contract=off: no fused multiply-add), each box's first best
 * anchor, each anchor's first best box; then the greedy bipartite matching (pairs in order
 * of IoU, highest first, ties in the order of the flattened (anchor, box) matrix), the
 * shared best anchors, and the maximum matching above the threshold.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../_core/_wide_loop.h"

/* One box against every anchor, in one loop that vectorizes: its IoUs into iou[0..n)
 * (MXNet's box_iou arithmetic), each anchor's best IoU and first best box so far updated
 * (box `b` takes an anchor only with a strictly greater IoU: the first box wins ties), and
 * the box's best IoU returned. The IoUs are finite and not negative (+0 at least), so
 * their bits order as they do. Compiled for AVX2 too (_wide_loop.h). */
WIDE_LOOP static float box_pass(const float *restrict rows, const float *restrict areas,
                                Py_ssize_t n, const float *box, int32_t b,
                                float *restrict iou, float *restrict anchor_best,
                                int32_t *restrict anchor_box)
{
    const float *x1 = rows, *y1 = rows + n, *x2 = rows + 2 * n, *y2 = rows + 3 * n;
    float bx1 = box[0], by1 = box[1], bx2 = box[2], by2 = box[3];
    float bw = bx2 - bx1, bh = by2 - by1;
    float box_area = (bw < 0 || bh < 0) ? 0.0f : bw * bh;
    int32_t top = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        float across = (x2[k] < bx2 ? x2[k] : bx2) - (x1[k] > bx1 ? x1[k] : bx1);
        float down = (y2[k] < by2 ? y2[k] : by2) - (y1[k] > by1 ? y1[k] : by1);
        float inter = (across > 0 ? across : 0.0f) * (down > 0 ? down : 0.0f);
        float ratio = inter / (areas[k] + box_area - inter);
        float value = inter <= 0 ? 0.0f : ratio;
        iou[k] = value;
        float best = anchor_best[k];
        int32_t better = -(int32_t)(value > best); /* all ones where box b is better */
        anchor_best[k] = value > best ? value : best;
        anchor_box[k] = (anchor_box[k] & ~better) | (b & better);
        int32_t bits;
        memcpy(&bits, &value, sizeof bits);
        top = bits > top ? bits : top;
    }
    float largest;
    memcpy(&largest, &top, sizeof largest);
    return largest;
}

/* The first index of the largest value among iou[0..n) whose anchor is not taken, and that
 * value (-inf when every anchor is taken). */
static Py_ssize_t first_best(const float *iou, const unsigned char *taken, Py_ssize_t n,
                             float *best)
{
    float top = -INFINITY;
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (!taken[k] && iou[k] > top) {
            top = iou[k];
            at = k;
        }
    }
    *best = top;
    return at;
}

typedef struct {
    Py_ssize_t n, m;        /* anchors, boxes per sample */
    float *iou;             /* (m, n) of one sample */
    float *anchor_best;     /* (n) each anchor's best IoU */
    int32_t *anchor_box;    /* (n) its first best box */
    float *box_best;        /* (m) each box's best IoU with an untaken anchor */
    Py_ssize_t *box_anchor; /* (m) its first such anchor */
    float *box_first_best;  /* (m) each box's best IoU before the matching */
    unsigned char *taken;   /* (n) anchors matched by the bipartite matching */
    unsigned char *open;    /* (m) real boxes not yet matched */
} Work;

/* The thresholds: gluoncv's bipartite threshold and share epsilon, and iou_thresh; as
 * float32, as MXNet applies them. */
typedef struct {
    float bipartite, share, iou;
} Limits;

static void match_sample(Work *w, const float *rows, const float *areas, const float *boxes,
                         const unsigned char *valid, Limits limits, int64_t *match)
{
    Py_ssize_t n = w->n, m = w->m, real = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        w->anchor_best[k] = -INFINITY;
        w->anchor_box[k] = -1;
        match[k] = -1;
    }
    memset(w->taken, 0, (size_t)n);
    for (Py_ssize_t b = 0; b < m; b++) {
        w->open[b] = valid == NULL || valid[b];
        if (!w->open[b])
            continue;
        real++;
        float *iou = w->iou + b * n;
        float best = box_pass(rows, areas, n, boxes + 4 * b, (int32_t)b, iou, w->anchor_best,
                              w->anchor_box);
        Py_ssize_t at = 0;
        while (at < n - 1 && iou[at] != best) /* its first best anchor */
            at++;
        w->box_anchor[b] = at;
        w->box_best[b] = best;
        w->box_first_best[b] = best;
    }
    if (real == 0)
        return; /* no box: nothing matches */

    /* greedy bipartite matching: the first remaining pair in order, while above the
     * threshold; boxes whose best anchor is taken look again among the others. Of boxes
     * tied at the top, the first: with one best anchor it is the first pair in order; with
     * different ones, both pairs are taken whichever goes first. */
    for (;;) {
        Py_ssize_t pick = -1;
        for (Py_ssize_t b = 0; b < m; b++) {
            if (w->open[b] && w->box_best[b] > limits.bipartite
                    && (pick < 0 || w->box_best[b] > w->box_best[pick]))
                pick = b;
        }
        if (pick < 0)
            break;
        Py_ssize_t anchor = w->box_anchor[pick];
        match[anchor] = pick;
        w->taken[anchor] = 1;
        w->open[pick] = 0;
        for (Py_ssize_t b = 0; b < m; b++) {
            if (w->open[b] && w->box_anchor[b] == anchor)
                w->box_anchor[b] = first_best(w->iou + b * n, w->taken, n, &w->box_best[b]);
        }
    }
    /* anchors left: the best anchor of their own best box (within the share epsilon), else
     * their best box at or above iou_thresh */
    for (Py_ssize_t k = 0; k < n; k++) {
        if (match[k] >= 0)
            continue;
        int32_t box = w->anchor_box[k];
        if (box < 0)
            continue; /* no IoU above -inf: only with NaN, which the caller keeps out */
        float best = w->anchor_best[k];
        float shared = best + limits.share;
        if (shared >= w->box_first_best[box] || best >= limits.iou)
            match[k] = box;
    }
}

/* A C-contiguous buffer of `items` items of one of `formats` (one character each, all of
 * `itemsize` bytes). */
static int get_buffer(PyObject *object, Py_buffer *view, int writable, const char *formats,
                      Py_ssize_t itemsize, Py_ssize_t items, const char *name)
{
    if (PyObject_GetBuffer(object, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_FORMAT
                                             | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    const char *format = view->format;
    if (format != NULL && (format[0] == '@' || format[0] == '='))
        format++;
    if (format == NULL || strlen(format) != 1 || strchr(formats, format[0]) == NULL
            || view->itemsize != itemsize || view->len != items * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s must be %zd contiguous items of %zd bytes, "
                     "format one of '%s'", name, items, itemsize, formats);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *ssd_match(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *rows_obj, *areas_obj, *boxes_obj, *valid_obj, *out_obj;
    Py_ssize_t batch, m, n;
    float bipartite, share, thresh; /* numpy float32 scalars, or floats rounded to float32 */
    if (!PyArg_ParseTuple(args, "OOOOfffnnnO", &rows_obj, &areas_obj, &boxes_obj, &valid_obj,
                          &bipartite, &share, &thresh, &batch, &m, &n, &out_obj))
        return NULL;
    if (batch < 0 || m < 0 || m > INT32_MAX || n < 1) {
        PyErr_SetString(PyExc_ValueError, "a batch needs at least one anchor, and fewer "
                        "than 2**31 boxes a sample");
        return NULL;
    }
    enum { ROWS, AREAS, BOXES, OUT, VALID };
    Py_buffer view[5];
    int held = 0, have_valid = valid_obj != Py_None;
    PyObject *result = NULL;
    Work w = {n, m, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    if (get_buffer(rows_obj, &view[ROWS], 0, "f", 4, 4 * n, "rows") < 0)
        goto release;
    held++;
    if (get_buffer(areas_obj, &view[AREAS], 0, "f", 4, n, "areas") < 0)
        goto release;
    held++;
    if (get_buffer(boxes_obj, &view[BOXES], 0, "f", 4, batch * m * 4, "boxes") < 0)
        goto release;
    held++;
    if (get_buffer(out_obj, &view[OUT], 1, "lq", 8, batch * n, "out") < 0)
        goto release;
    held++;
    if (have_valid && get_buffer(valid_obj, &view[VALID], 0, "?", 1, batch * m, "valid") < 0)
        goto release;
    held += have_valid;

    size_t boxes_ = (size_t)m + 1, anchors = (size_t)n;
    w.iou = PyMem_Malloc(sizeof(float) * boxes_ * anchors);
    w.anchor_best = PyMem_Malloc(sizeof(float) * anchors);
    w.anchor_box = PyMem_Malloc(sizeof(int32_t) * anchors);
    w.box_best = PyMem_Malloc(sizeof(float) * boxes_);
    w.box_anchor = PyMem_Malloc(sizeof(Py_ssize_t) * boxes_);
    w.box_first_best = PyMem_Malloc(sizeof(float) * boxes_);
    w.taken = PyMem_Malloc(anchors);
    w.open = PyMem_Malloc(boxes_);
    if (!w.iou || !w.anchor_best || !w.anchor_box || !w.box_best || !w.box_anchor
            || !w.box_first_best || !w.taken || !w.open) {
        PyErr_NoMemory();
        goto release;
    }
    const float *rows = view[ROWS].buf, *areas = view[AREAS].buf, *boxes = view[BOXES].buf;
    const unsigned char *valid = have_valid ? view[VALID].buf : NULL;
    int64_t *out = view[OUT].buf;
    Limits limits = {bipartite, share, thresh};
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t s = 0; s < batch; s++)
        match_sample(&w, rows, areas, boxes + s * m * 4, valid ? valid + s * m : NULL, limits,
                     out + s * n);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
release:
    PyMem_Free(w.iou);
    PyMem_Free(w.anchor_best);
    PyMem_Free(w.anchor_box);
    PyMem_Free(w.box_best);
    PyMem_Free(w.box_anchor);
    PyMem_Free(w.box_first_best);
    PyMem_Free(w.taken);
    PyMem_Free(w.open);
    while (held > 0)
        PyBuffer_Release(&view[--held]);
    return result;
}

static PyMethodDef methods[] = {
    {"ssd_match", ssd_match, METH_VARARGS,
     "ssd_match(rows, areas, boxes, valid, bipartite_threshold, share_eps, iou_thresh, "
     "batch, boxes_per_sample, anchors, out)\n\nThe anchors' matched boxes (-1: none) of "
     "every sample into out; see "
     "gluonbatch.targets.ssd.ssd_match."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_ssd_match",
    "gluoncv's SSD matching, compiled (gluonbatch.targets.ssd).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ssd_match(void)
{
    return PyModule_Create(&module);
}

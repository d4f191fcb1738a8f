/* Two of OpenCV's float32 resizes (cv::resize) of the part of an expanded canvas, compiled to
 * read the uint8 image itself: see canvas_resize.py. A canvas pixel is values[c][byte]
 * where the image shows (the float32 value the float crop would hold) and 0 elsewhere.
 * Built with -ffp-contract=off: no fused multiply-add, as OpenCV's baseline code has none.
 *
 * Area (INTER_AREA where both sides shrink, no whole-number scale): OpenCV 4's generic
 * area path step by step. The tables of source cells and their weights in double, cast to
 * float; per source row, each output's taps summed in float in the order of the table; per
 * output row, its source rows weighted and summed in float, the first row's weight times
 * its sums starting the sum. A tap on 0 adds nothing (x + 0 is x for every sum here, none
 * of which is -0), so taps outside the image are skipped and a row outside it is 0.
 *
 * Lanczos (INTER_LANCZOS4): OpenCV 4's generic path. Each output's position and 8
 * weights as interpolateLanczos4 computes them; per source row (clamped to the part), 8
 * taps (clamped to the row) summed left to right; per output row, 8 weighted rows summed
 * right to left where OpenCV's vector loop runs (all but the row's last len % lanes
 * values) and left to right in its scalar tail. Every tap is computed, fill included.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_ssize_t out;    /* the output pixel (or row) */
    Py_ssize_t src;    /* the source pixel (or row) it reads */
    float alpha;       /* the weight */
} Tap;

/* OpenCV's computeResizeAreaTab: the taps of `outputs` cells of `scale` source pixels
 * each over `length` pixels, in order; returns how many (at most 2 * length). */
static Py_ssize_t area_taps(Py_ssize_t length, Py_ssize_t outputs, double scale, Tap *taps)
{
    Py_ssize_t k = 0;
    for (Py_ssize_t d = 0; d < outputs; d++) {
        double first = (double)d * scale;
        double last = first + scale;
        double cell = scale < (double)length - first ? scale : (double)length - first;
        Py_ssize_t s1 = (Py_ssize_t)ceil(first), s2 = (Py_ssize_t)floor(last);
        if (s2 > length - 1)
            s2 = length - 1;
        if (s1 > s2)
            s1 = s2;
        if ((double)s1 - first > 1e-3 && k < 2 * length)
            taps[k++] = (Tap){d, s1 - 1, (float)(((double)s1 - first) / cell)};
        for (Py_ssize_t s = s1; s < s2 && k < 2 * length; s++)
            taps[k++] = (Tap){d, s, (float)(1.0 / cell)};
        if (last - (double)s2 > 1e-3 && k < 2 * length) {
            double part = last - (double)s2 < 1.0 ? last - (double)s2 : 1.0;
            taps[k++] = (Tap){d, s2, (float)((part < cell ? part : cell) / cell)};
        }
    }
    return k;
}

typedef struct {
    const uint8_t *pixels;          /* the image's first pixel */
    Py_ssize_t rows;                /* its height */
    Py_ssize_t row_step, channel_step;   /* its strides in bytes, any sign */
    Py_ssize_t y;                   /* the part's row its first row sits on */
    const float *values;            /* values[c * 256 + byte] */
    const Py_ssize_t *first, *stop; /* per output, its taps on the image: [first, stop) */
    const Py_ssize_t *offset;       /* per tap, its pixel's byte offset in a row */
    const float *alpha;             /* per tap, its weight */
} Row;

/* The taps of one source row of the part into buf (3 floats per output), each output's
 * sums kept in registers: the same additions, in the same order, as OpenCV's buffer. */
static void row_pass(const Row *r, Py_ssize_t row, float *buf, Py_ssize_t width)
{
    Py_ssize_t image_row = row - r->y;
    if (image_row < 0 || image_row >= r->rows) {
        memset(buf, 0, (size_t)width * 3 * sizeof(float));
        return;
    }
    const uint8_t *line = r->pixels + image_row * r->row_step;
    const float *v0 = r->values, *v1 = v0 + 256, *v2 = v0 + 512;
    Py_ssize_t step = r->channel_step;
    for (Py_ssize_t d = 0; d < width; d++) {
        float t0 = 0.0f, t1 = 0.0f, t2 = 0.0f;
        for (Py_ssize_t k = r->first[d]; k < r->stop[d]; k++) {
            const uint8_t *p = line + r->offset[k];
            float alpha = r->alpha[k];
            t0 = t0 + v0[p[0]] * alpha;
            t1 = t1 + v1[p[step]] * alpha;
            t2 = t2 + v2[p[2 * step]] * alpha;
        }
        buf[3 * d] = t0;
        buf[3 * d + 1] = t1;
        buf[3 * d + 2] = t2;
    }
}

/* Each output's taps on the image's columns (cols of them, the first at the part's column
 * x, col_step bytes apart): the taps of an output are in order of their columns, so those
 * on the image are one run of them. */
static void column_taps(const Tap *taps, Py_ssize_t count, Py_ssize_t outputs, Py_ssize_t x,
                        Py_ssize_t cols, Py_ssize_t col_step, Py_ssize_t *first,
                        Py_ssize_t *stop, Py_ssize_t *offset, float *alpha)
{
    for (Py_ssize_t d = 0; d < outputs; d++)
        first[d] = stop[d] = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t d = taps[k].out, col = taps[k].src - x;
        offset[k] = col * col_step;
        alpha[k] = taps[k].alpha;
        if (col < 0 || col >= cols)
            continue;
        if (stop[d] == 0)
            first[d] = k;
        stop[d] = k + 1;
    }
}

static int get_buffer(PyObject *object, Py_buffer *view, int flags, Py_ssize_t itemsize,
                      const char *name)
{
    if (PyObject_GetBuffer(object, view, flags | PyBUF_FORMAT) < 0)
        return -1;
    if (view->itemsize != itemsize || view->ndim != 3 || view->shape[2] != 3) {
        PyErr_Format(PyExc_ValueError, "%s must be (H, W, 3) of %zd-byte items", name,
                     itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* The arguments both resizes take: the uint8 image and where it sits in the part, the
 * byte values, the part's size, the factors OpenCV was given, and the float32 output. */
typedef struct {
    Py_buffer src, values, out;
    Py_ssize_t x, y, width, height;
    double fx, fy;
} Call;

static int parse_call(PyObject *args, Call *call)
{
    PyObject *src, *values, *out;
    if (!PyArg_ParseTuple(args, "OOnnnnddO", &src, &values, &call->x, &call->y,
                          &call->width, &call->height, &call->fx, &call->fy, &out))
        return -1;
    if (get_buffer(src, &call->src, PyBUF_STRIDES, 1, "src") < 0)
        return -1;
    if (PyObject_GetBuffer(values, &call->values, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&call->src);
        return -1;
    }
    if (get_buffer(out, &call->out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE, 4, "out") < 0) {
        PyBuffer_Release(&call->values);
        PyBuffer_Release(&call->src);
        return -1;
    }
    if (call->values.len != 3 * 256 * (Py_ssize_t)sizeof(float) || call->values.itemsize != 4
            || call->width < 1 || call->height < 1 || call->out.shape[0] < 1
            || call->out.shape[1] < 1 || !(call->fx > 0) || !(call->fy > 0)) {
        PyErr_SetString(PyExc_ValueError,
                        "values must be 3x256 float32, the sizes and factors positive");
        PyBuffer_Release(&call->out);
        PyBuffer_Release(&call->values);
        PyBuffer_Release(&call->src);
        return -1;
    }
    return 0;
}

static void release_call(Call *call)
{
    PyBuffer_Release(&call->out);
    PyBuffer_Release(&call->values);
    PyBuffer_Release(&call->src);
}

/* ---- area ---- */

static PyObject *area_resize(PyObject *self, PyObject *args)
{
    Call call;
    if (parse_call(args, &call) < 0)
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t width = call.width, height = call.height, x = call.x, y = call.y;
    Py_ssize_t out_h = call.out.shape[0], out_w = call.out.shape[1];
    Py_buffer src = call.src;
    Tap *xtaps = PyMem_Malloc(sizeof(Tap) * 2 * (size_t)width);
    Tap *ytaps = PyMem_Malloc(sizeof(Tap) * 2 * (size_t)height);
    float *buf = PyMem_Malloc(sizeof(float) * 3 * (size_t)out_w);
    float *sum = PyMem_Malloc(sizeof(float) * 3 * (size_t)out_w);
    Py_ssize_t *first = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (size_t)out_w);
    Py_ssize_t *offset = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (size_t)width);
    float *alpha = PyMem_Malloc(sizeof(float) * 2 * (size_t)width);
    if (!xtaps || !ytaps || !buf || !sum || !first || !offset || !alpha) {
        PyErr_NoMemory();
        goto release;
    }
    float *dst = call.out.buf;
    Py_ssize_t row_floats = 3 * out_w;
    double fx = call.fx, fy = call.fy;
    Py_BEGIN_ALLOW_THREADS
    /* OpenCV's scales: the reciprocals of the factors it was given */
    Py_ssize_t nx = area_taps(width, out_w, 1.0 / fx, xtaps);
    Py_ssize_t ny = area_taps(height, out_h, 1.0 / fy, ytaps);
    column_taps(xtaps, nx, out_w, x, src.shape[1], src.strides[1], first, first + out_w,
                offset, alpha);
    Row r = {src.buf, src.shape[0], src.strides[0], src.strides[2], y, call.values.buf, first,
             first + out_w, offset, alpha};
    Py_ssize_t buffered = -1, previous = ny ? ytaps[0].out : 0;
    memset(sum, 0, sizeof(float) * (size_t)row_floats);
    for (Py_ssize_t j = 0; j < ny; j++) {
        float beta = ytaps[j].alpha;
        if (ytaps[j].src != buffered) {  /* a row read by two outputs is summed once */
            row_pass(&r, ytaps[j].src, buf, out_w);
            buffered = ytaps[j].src;
        }
        if (ytaps[j].out != previous) {
            memcpy(dst + previous * row_floats, sum, sizeof(float) * (size_t)row_floats);
            for (Py_ssize_t i = 0; i < row_floats; i++)
                sum[i] = beta * buf[i];
            previous = ytaps[j].out;
        } else {
            for (Py_ssize_t i = 0; i < row_floats; i++)
                sum[i] += beta * buf[i];
        }
    }
    if (ny)
        memcpy(dst + previous * row_floats, sum, sizeof(float) * (size_t)row_floats);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
release:
    PyMem_Free(xtaps);
    PyMem_Free(ytaps);
    PyMem_Free(buf);
    PyMem_Free(sum);
    PyMem_Free(first);
    PyMem_Free(offset);
    PyMem_Free(alpha);
    release_call(&call);
    return result;
}

/* ---- Lanczos ---- */

/* OpenCV's interpolateLanczos4: the 8 weights of a sample at fraction x past its pixel. */
static void lanczos_weights(float x, float *weights)
{
    static const double s45 = 0.70710678118654752440084436210485;
    static const double cs[8][2] = {{1, 0}, {-s45, -s45}, {0, 1}, {s45, -s45},
                                    {-1, 0}, {s45, s45}, {0, -1}, {-s45, s45}};
    float sum = 0;
    double y0 = -(x + 3) * M_PI * 0.25, s0 = sin(y0), c0 = cos(y0);
    for (int i = 0; i < 8; i++) {
        float y0_ = x + 3 - i;
        if (fabsf(y0_) >= FLT_EPSILON) {
            double y = -y0_ * M_PI * 0.25;
            weights[i] = (float)((cs[i][0] * s0 + cs[i][1] * c0) / (y * y));
        } else {
            weights[i] = 1e30f;  /* OpenCV's stand-in at the sample's own pixel */
        }
        sum += weights[i];
    }
    sum = 1.f / sum;
    for (int i = 0; i < 8; i++)
        weights[i] *= sum;
}

/* Each output's first source pixel (that of its first tap plus 3) and 8 weights. */
static void lanczos_positions(Py_ssize_t outputs, double scale, Py_ssize_t *first,
                              float *weights)
{
    for (Py_ssize_t d = 0; d < outputs; d++) {
        float f = (float)((d + 0.5) * scale - 0.5);
        Py_ssize_t s = (Py_ssize_t)floorf(f);
        first[d] = s;
        lanczos_weights(f - (float)s, weights + 8 * d);
    }
}

typedef struct {
    const uint8_t *pixels;
    Py_ssize_t rows, cols, row_step, col_step, channel_step, x, y, width;
    const float *values;
} Part;

/* One row of the part as float values (3 per pixel): the image's, 0 elsewhere. */
static void part_row(const Part *p, Py_ssize_t row, float *out)
{
    memset(out, 0, sizeof(float) * (3 * (size_t)p->width + 1));  /* and the spare float */
    Py_ssize_t image_row = row - p->y;
    if (image_row < 0 || image_row >= p->rows)
        return;
    const uint8_t *line = p->pixels + image_row * p->row_step;
    const float *v0 = p->values, *v1 = v0 + 256, *v2 = v0 + 512;
    Py_ssize_t start = p->x > 0 ? p->x : 0, stop = p->x + p->cols;
    if (stop > p->width)
        stop = p->width;
    for (Py_ssize_t col = start; col < stop; col++) {
        const uint8_t *q = line + (col - p->x) * p->col_step;
        out[3 * col] = v0[q[0]];
        out[3 * col + 1] = v1[q[p->channel_step]];
        out[3 * col + 2] = v2[q[2 * p->channel_step]];
    }
}

/* Four floats, added and multiplied lane by lane (SSE or NEON where there are, each lane
 * IEEE float arithmetic as a scalar's). */
typedef float Floats4 __attribute__((vector_size(16)));

static inline Floats4 load4(const float *p)
{
    Floats4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* OpenCV's HResizeLanczos4 of one row of values (3 per pixel, `width` pixels, and one
 * more float after them, read and never used): an output whose 8 taps all lie on the row
 * sums them left to right, its 3 channels in the lanes of one vector; the others start
 * from 0 and clamp their taps to the row's ends. Writes 3 floats per output into `out`,
 * and may write one float past them. */
static void lanczos_across(const float *row, Py_ssize_t width, const Py_ssize_t *first,
                           const float *weights, Py_ssize_t outputs, float *out)
{
    for (Py_ssize_t d = 0; d < outputs; d++) {
        const float *w = weights + 8 * d;
        Py_ssize_t s = first[d] - 3;
        if (s >= 0 && s + 7 < width) {
            const float *t = row + 3 * s;
            Floats4 v = load4(t) * w[0];
            v = v + load4(t + 3) * w[1];
            v = v + load4(t + 6) * w[2];
            v = v + load4(t + 9) * w[3];
            v = v + load4(t + 12) * w[4];
            v = v + load4(t + 15) * w[5];
            v = v + load4(t + 18) * w[6];
            v = v + load4(t + 21) * w[7];
            memcpy(out + 3 * d, &v, sizeof v);  /* the 4th float: the next output's, or spare */
            continue;
        }
        for (int c = 0; c < 3; c++) {
            float v = 0;
            for (int j = 0; j < 8; j++) {
                Py_ssize_t col = s + j < 0 ? 0 : (s + j >= width ? width - 1 : s + j);
                v += row[3 * col + c] * w[j];
            }
            out[3 * d + c] = v;
        }
    }
}

/* OpenCV's VResizeLanczos4 of 8 rows of `count` values: right to left in the vector loop
 * (the first count - count % lanes values), left to right in the scalar tail. */
static void lanczos_down(const float *const *rows, const float *w, Py_ssize_t count,
                         Py_ssize_t lanes, float *out)
{
    Py_ssize_t body = count - count % lanes;
    const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
    const float *r4 = rows[4], *r5 = rows[5], *r6 = rows[6], *r7 = rows[7];
    for (Py_ssize_t i = 0; i < body; i++)
        out[i] = r0[i] * w[0] + (r1[i] * w[1] + (r2[i] * w[2] + (r3[i] * w[3] + (r4[i] * w[4]
                 + (r5[i] * w[5] + (r6[i] * w[6] + r7[i] * w[7]))))));
    for (Py_ssize_t i = body; i < count; i++)
        out[i] = r0[i] * w[0] + r1[i] * w[1] + r2[i] * w[2] + r3[i] * w[3] + r4[i] * w[4]
                 + r5[i] * w[5] + r6[i] * w[6] + r7[i] * w[7];
}

static PyObject *lanczos_resize(PyObject *self, PyObject *args)
{
    Py_ssize_t lanes;
    PyObject *call_args;
    if (!PyArg_ParseTuple(args, "nO!", &lanes, &PyTuple_Type, &call_args))
        return NULL;
    if (lanes < 1) {
        PyErr_SetString(PyExc_ValueError, "lanes must be positive");
        return NULL;
    }
    Call call;
    if (parse_call(call_args, &call) < 0)
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t out_h = call.out.shape[0], out_w = call.out.shape[1], width = call.width;
    Py_ssize_t count = 3 * out_w;
    Py_ssize_t *xfirst = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)out_w);
    Py_ssize_t *yfirst = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)out_h);
    float *xweights = PyMem_Malloc(sizeof(float) * 8 * (size_t)out_w);
    float *yweights = PyMem_Malloc(sizeof(float) * 8 * (size_t)out_h);
    /* a row of the part, and the float past it that the vectors read */
    float *line = PyMem_Malloc(sizeof(float) * (3 * (size_t)width + 1));
    /* 8 rows across, in slots by source row modulo 8, and the row of fill's; each with a
     * float past its end, which the vectors of its last output write */
    Py_ssize_t stride = count + 1;
    float *across = PyMem_Malloc(sizeof(float) * 9 * (size_t)stride);
    if (!xfirst || !yfirst || !xweights || !yweights || !line || !across) {
        PyErr_NoMemory();
        goto release;
    }
    Part part = {call.src.buf, call.src.shape[0], call.src.shape[1], call.src.strides[0],
                 call.src.strides[1], call.src.strides[2], call.x, call.y, width,
                 call.values.buf};
    float *dst = call.out.buf;
    Py_ssize_t height = call.height;
    double fx = call.fx, fy = call.fy;
    Py_BEGIN_ALLOW_THREADS
    lanczos_positions(out_w, 1.0 / fx, xfirst, xweights);
    lanczos_positions(out_h, 1.0 / fy, yfirst, yweights);
    Py_ssize_t held[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    float *fill = across + 8 * stride;
    int fill_done = 0;
    for (Py_ssize_t d = 0; d < out_h; d++) {
        const float *rows[8];
        for (int k = 0; k < 8; k++) {
            Py_ssize_t r = yfirst[d] - 3 + k;
            r = r < 0 ? 0 : (r >= height ? height - 1 : r);
            if (r - call.y < 0 || r - call.y >= part.rows) {  /* all fill: one row for all */
                if (!fill_done) {
                    memset(line, 0, sizeof(float) * (3 * (size_t)width + 1));
                    lanczos_across(line, width, xfirst, xweights, out_w, fill);
                    fill_done = 1;
                }
                rows[k] = fill;
                continue;
            }
            float *slot = across + (r & 7) * stride;
            if (held[r & 7] != r) {
                part_row(&part, r, line);
                lanczos_across(line, width, xfirst, xweights, out_w, slot);
                held[r & 7] = r;
            }
            rows[k] = slot;
        }
        lanczos_down(rows, yweights + 8 * d, count, lanes, dst + d * count);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
release:
    PyMem_Free(xfirst);
    PyMem_Free(yfirst);
    PyMem_Free(xweights);
    PyMem_Free(yweights);
    PyMem_Free(line);
    PyMem_Free(across);
    release_call(&call);
    return result;
}

static PyMethodDef methods[] = {
    {"area_resize", area_resize, METH_VARARGS,
     "area_resize(src, values, x, y, width, height, fx, fy, out)\n\nOpenCV's area resize by "
     "(fx, fy) of the width x height part of a canvas holding the uint8 image src at (x, y), "
     "values[c][byte] where it shows and 0 elsewhere, into the float32 out; see "
     "gluonbatch.transforms.canvas_resize."},
    {"lanczos_resize", lanczos_resize, METH_VARARGS,
     "lanczos_resize(lanes, (src, values, x, y, width, height, fx, fy, out))\n\nOpenCV's "
     "Lanczos resize of the same, its vector loop `lanes` floats wide; see "
     "gluonbatch.transforms.canvas_resize."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_canvas_resize",
    "OpenCV's area and Lanczos resizes from a uint8 image, compiled "
    "(gluonbatch.transforms.canvas_resize).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__canvas_resize(void)
{
    return PyModule_Create(&module);
}

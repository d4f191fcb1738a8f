/* OpenCV's area resize of a float32 image that shrinks on both sides (cv::resize with
 * INTER_AREA, a scale that is no whole number on either side), compiled to read the part
 * of an expanded canvas straight from the uint8 image: see area.py.
 *
 * OpenCV 4's generic area path, repeated step by step: the tables of source cells and their
 * weights in double, cast to float; per source row, each output's taps summed into a row
 * buffer, in float, in the order of the table; per output row, its source rows' buffers
 * weighted and summed in float, the first row's weight times its buffer starting the sum.
 * Built with -ffp-contract=off: no fused multiply-add, as OpenCV's baseline code has none.
 *
 * A canvas pixel is values[c][byte] where the image is (the float32 values the float crop
 * would hold) and 0 elsewhere; a tap on 0 adds nothing (x + 0 is x for every sum here,
 * none of which is -0), so taps outside the image are skipped, and a row outside it is 0.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
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

static PyObject *area_resize(PyObject *self, PyObject *args)
{
    PyObject *src_obj, *values_obj, *out_obj;
    Py_ssize_t x, y, width, height;
    double fx, fy;
    if (!PyArg_ParseTuple(args, "OOnnnnddO", &src_obj, &values_obj, &x, &y, &width, &height,
                          &fx, &fy, &out_obj))
        return NULL;
    Py_buffer src, values, out;
    if (get_buffer(src_obj, &src, PyBUF_STRIDES, 1, "src") < 0)
        return NULL;
    if (PyObject_GetBuffer(values_obj, &values, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&src);
        return NULL;
    }
    if (get_buffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE, 4, "out") < 0) {
        PyBuffer_Release(&values);
        PyBuffer_Release(&src);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t out_h = out.shape[0], out_w = out.shape[1];
    Tap *xtaps = NULL, *ytaps = NULL;
    float *buf = NULL, *sum = NULL, *alpha = NULL;
    Py_ssize_t *first = NULL, *offset = NULL;
    if (values.len != 3 * 256 * (Py_ssize_t)sizeof(float) || values.itemsize != 4
            || width < 1 || height < 1 || out_w < 1 || out_h < 1) {
        PyErr_SetString(PyExc_ValueError, "values must be 3x256 float32 and the sizes positive");
        goto release;
    }
    xtaps = PyMem_Malloc(sizeof(Tap) * 2 * (size_t)width);
    ytaps = PyMem_Malloc(sizeof(Tap) * 2 * (size_t)height);
    buf = PyMem_Malloc(sizeof(float) * 3 * (size_t)out_w);
    sum = PyMem_Malloc(sizeof(float) * 3 * (size_t)out_w);
    first = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (size_t)out_w);
    offset = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (size_t)width);
    alpha = PyMem_Malloc(sizeof(float) * 2 * (size_t)width);
    if (!xtaps || !ytaps || !buf || !sum || !first || !offset || !alpha) {
        PyErr_NoMemory();
        goto release;
    }
    float *dst = out.buf;
    Py_ssize_t row_floats = 3 * out_w;
    Py_BEGIN_ALLOW_THREADS
    /* OpenCV's scales: the reciprocals of the factors it was given */
    Py_ssize_t nx = area_taps(width, out_w, 1.0 / fx, xtaps);
    Py_ssize_t ny = area_taps(height, out_h, 1.0 / fy, ytaps);
    column_taps(xtaps, nx, out_w, x, src.shape[1], src.strides[1], first, first + out_w,
                offset, alpha);
    Row r = {src.buf, src.shape[0], src.strides[0], src.strides[2], y, values.buf, first,
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
    PyBuffer_Release(&out);
    PyBuffer_Release(&values);
    PyBuffer_Release(&src);
    return result;
}

static PyMethodDef methods[] = {
    {"area_resize", area_resize, METH_VARARGS,
     "area_resize(src, values, x, y, width, height, fx, fy, out)\n\nOpenCV's area resize by "
     "(fx, fy) of the width x height part of a canvas holding the uint8 image src at (x, y), "
     "values[c][byte] where it shows and 0 elsewhere, into the float32 out; see "
     "gluonbatch.transforms.area."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_area",
    "OpenCV's area resize from a uint8 image, compiled (gluonbatch.transforms.area).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__area(void)
{
    return PyModule_Create(&module);
}

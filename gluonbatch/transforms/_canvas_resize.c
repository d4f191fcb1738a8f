/* OpenCV's float32 resizes (cv::resize) of the part of an expanded canvas, compiled to read
 * the uint8 image itself: see canvas_resize.py. A canvas pixel is values[c][byte] where
 * the image shows (the float32 value the float crop would hold) and 0 elsewhere. Built
 * with -ffp-contract=off: no fused multiply-add, as OpenCV's baseline code has none. This
 * file takes the calls from Python; _canvas_nearest.c, _canvas_area.c and _canvas_lanczos.c
 * compute, and _canvas_row.c writes the part's values, also for the resizes left to OpenCV
 * (part). */
#include "_canvas.h"

#include <string.h>

/* The longest side of a part or an output (canvas_resize.LARGEST): every size computed
 * from it fits a Py_ssize_t many times over. */
#define LARGEST ((Py_ssize_t)1 << 28)

/* `object`'s buffer as `format` items (a TypeError otherwise) of shape (rows, cols) +
 * `last` (a ValueError otherwise; rows, cols below 0 take any count). */
static int get_buffer(PyObject *object, Py_buffer *view, int flags, const char *format,
                      Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t last, const char *name)
{
    if (PyObject_GetBuffer(object, view, flags | PyBUF_FORMAT) < 0)
        return -1;
    if (strcmp(view->format, format) != 0) {
        PyErr_Format(PyExc_TypeError, "%s must hold '%s' items, got '%s'", name, format,
                     view->format);
        PyBuffer_Release(view);
        return -1;
    }
    int ndim = last ? 3 : 2;
    if (view->ndim != ndim || (rows >= 0 && view->shape[0] != rows)
            || (cols >= 0 && view->shape[1] != cols) || (last && view->shape[2] != last)) {
        PyErr_Format(PyExc_ValueError, "%s has the wrong shape (%zd dimensions)", name,
                     (Py_ssize_t)view->ndim);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static void release_canvas_buffers(Py_buffer *src, Py_buffer *values, Py_buffer *out)
{
    PyBuffer_Release(out);
    PyBuffer_Release(values);
    PyBuffer_Release(src);
}

/* The buffers of a call: src (uint8 HWC, any strides), values ((3, 256) float32) and out
 * (float32 HWC: C-contiguous, or with `strided_rows` rows that are each contiguous and
 * lie in order, as in a part of a larger image), the sides at most 2**28; -1, with an
 * exception set and nothing held, otherwise. */
static int get_canvas_buffers(PyObject *src_obj, PyObject *values_obj, PyObject *out_obj,
                              int strided_rows, Py_buffer *src, Py_buffer *values,
                              Py_buffer *out)
{
    if (get_buffer(src_obj, src, PyBUF_STRIDES, "B", -1, -1, 3, "src") < 0)
        return -1;
    if (get_buffer(values_obj, values, PyBUF_C_CONTIGUOUS, "f", 3, 256, 0, "values") < 0) {
        PyBuffer_Release(src);
        return -1;
    }
    if (get_buffer(out_obj, out, (strided_rows ? PyBUF_STRIDES : PyBUF_C_CONTIGUOUS)
                   | PyBUF_WRITABLE, "f", -1, -1, 3, "out") < 0) {
        PyBuffer_Release(values);
        PyBuffer_Release(src);
        return -1;
    }
    if (strided_rows && (out->strides[2] != sizeof(float)
                         || out->strides[1] != 3 * (Py_ssize_t)sizeof(float)
                         || out->strides[0] % (Py_ssize_t)sizeof(float) != 0
                         || out->strides[0] < out->strides[1] * out->shape[1])) {
        PyErr_SetString(PyExc_ValueError, "out's rows must each be contiguous and lie in "
                        "order");
        release_canvas_buffers(src, values, out);
        return -1;
    }
    if (out->shape[0] > LARGEST || out->shape[1] > LARGEST || src->shape[0] > LARGEST
            || src->shape[1] > LARGEST) {
        PyErr_SetString(PyExc_ValueError, "out and src must have at most 2**28 rows and "
                        "columns");
        release_canvas_buffers(src, values, out);
        return -1;
    }
    return 0;
}

/* The width x height part of the canvas with the image `src` at (x, y), its values those
 * of `values` (see _canvas.h). */
static Canvas canvas_of(const Py_buffer *src, const Py_buffer *values, Py_ssize_t x,
                        Py_ssize_t y, Py_ssize_t width, Py_ssize_t height)
{
    Canvas canvas = {src->buf, src->shape[0], src->shape[1], src->strides[0], src->strides[1],
                     src->strides[2], x, y, width, height, values->buf, 0, {0, 0, 0}};
    describe_values(&canvas);
    return canvas;
}

static PyObject *resize(PyObject *self, PyObject *args)
{
    int interp;
    Py_ssize_t lanes, x, y, width, height;
    double fx, fy;
    PyObject *src_obj, *values_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "inOOnnnnddO", &interp, &lanes, &src_obj, &values_obj, &x, &y,
                          &width, &height, &fx, &fy, &out_obj))
        return NULL;
    if ((interp != NEAREST && interp != AREA && interp != LANCZOS) || lanes < 1 || width < 1
            || height < 1 || width > LARGEST || height > LARGEST || x < -LARGEST
            || x > LARGEST || y < -LARGEST || y > LARGEST || !(fx > 0) || !(fy > 0)) {
        PyErr_SetString(PyExc_ValueError, "nearest (0), area (3) or Lanczos (4), positive "
                        "lanes and factors, sizes of 1 to 2**28 and offsets within 2**28 "
                        "are needed");
        return NULL;
    }
    Py_buffer src, values, out;
    if (get_canvas_buffers(src_obj, values_obj, out_obj, 1, &src, &values, &out) < 0)
        return NULL;
    PyObject *result = NULL;
    if (out.shape[0] < 1 || out.shape[1] < 1) {
        PyErr_SetString(PyExc_ValueError, "out must have at least 1 row and column");
        goto release;
    }
    Canvas canvas = canvas_of(&src, &values, x, y, width, height);
    Output output = {out.buf, out.shape[1], out.shape[0],
                     out.strides[0] / (Py_ssize_t)sizeof(float)};
    int status;
    Py_BEGIN_ALLOW_THREADS
    if (interp == AREA)
        status = area_resize(&canvas, fx, fy, output);
    else if (interp == NEAREST)
        status = nearest_resize(&canvas, fx, fy, output);
    else
        status = lanczos_resize(&canvas, lanes, fx, fy, output);
    Py_END_ALLOW_THREADS
    result = status < 0 ? PyErr_NoMemory() : Py_NewRef(Py_None);
release:
    release_canvas_buffers(&src, &values, &out);
    return result;
}

/* part(src, values, x, y, out): the canvas part of out's size, its values into out. */
static PyObject *part(PyObject *self, PyObject *args)
{
    Py_ssize_t x, y;
    PyObject *src_obj, *values_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOnnO", &src_obj, &values_obj, &x, &y, &out_obj))
        return NULL;
    if (x < -LARGEST || x > LARGEST || y < -LARGEST || y > LARGEST) {
        PyErr_SetString(PyExc_ValueError, "offsets within 2**28 are needed");
        return NULL;
    }
    Py_buffer src, values, out;
    if (get_canvas_buffers(src_obj, values_obj, out_obj, 0, &src, &values, &out) < 0)
        return NULL;
    Canvas canvas = canvas_of(&src, &values, x, y, out.shape[1], out.shape[0]);
    Py_BEGIN_ALLOW_THREADS
    float *row = out.buf;
    for (Py_ssize_t r = 0; r < canvas.height; r++, row += 3 * canvas.width)
        canvas_row(&canvas, r, row);
    Py_END_ALLOW_THREADS
    release_canvas_buffers(&src, &values, &out);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"resize", resize, METH_VARARGS,
     "resize(interp, lanes, src, values, x, y, width, height, fx, fy, out)\n\nOpenCV's resize "
     "by (fx, fy), with the interpolation code interp, of the width x height part of a canvas "
     "holding the uint8 image src at (x, y), values[c][byte] where it shows and 0 elsewhere, "
     "into the float32 out (its rows contiguous, in order); OpenCV's vector loops `lanes` "
     "floats wide. See "
     "gluonbatch.transforms.canvas_resize."},
    {"part", part, METH_VARARGS,
     "part(src, values, x, y, out)\n\nThe part of out's size of a canvas holding the uint8 "
     "image src at (x, y), values[c][byte] where it shows and 0 elsewhere, into the float32 "
     "out."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_canvas_resize",
    "OpenCV's float32 resizes from a uint8 image, compiled "
    "(gluonbatch.transforms.canvas_resize).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__canvas_resize(void)
{
    return PyModule_Create(&module);
}

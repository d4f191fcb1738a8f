/* OpenCV's area resize (INTER_AREA) of a canvas part that shrinks on both sides, no scale a
 * whole number: OpenCV 4's generic area path step by step. The tables of source cells and
 * their weights in double, cast to float; per source row, each output's taps summed in
 * float in the order of the table; per output row, its source rows weighted and summed in
 * float, the first row's weight times its sums starting the sum. A tap on 0 adds nothing
 * (x + 0 is x for every sum here, none of which is -0), so taps outside the image are
 * skipped and a row outside it is 0. */

#include "_canvas.h"

#include <math.h>

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

/* Per output, the run of its taps that land on the image, [first, stop) (an output's
 * taps are in order of their columns, so those on the image are one run; the others read
 * 0 and add nothing). */
static void taps_on_image(const Tap *taps, Py_ssize_t count, Py_ssize_t outputs,
                          const Canvas *canvas, Py_ssize_t *first, Py_ssize_t *stop)
{
    for (Py_ssize_t d = 0; d < outputs; d++)
        first[d] = stop[d] = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t d = taps[k].out, col = taps[k].src - canvas->x;
        if (col < 0 || col >= canvas->cols)
            continue;
        if (stop[d] == 0)
            first[d] = k;
        stop[d] = k + 1;
    }
}

/* The taps of one row of values (3 per pixel and a spare, canvas_row's) into buf: per
 * output, from 0, each tap's value times its weight added in the table's order, the 3
 * channels in the lanes of one vector. Writes 3 floats per output, and possibly one past
 * them. */
static void area_across(const float *row, const Tap *taps, const Py_ssize_t *first,
                        const Py_ssize_t *stop, Py_ssize_t outputs, float *buf)
{
    for (Py_ssize_t d = 0; d < outputs; d++) {
        Floats4 v = {0.0f, 0.0f, 0.0f, 0.0f};
        for (Py_ssize_t k = first[d]; k < stop[d]; k++)
            v = v + load4(row + 3 * taps[k].src) * taps[k].alpha;
        memcpy(buf + 3 * d, &v, sizeof v);
    }
}

/* sum = beta * buf (an output row's first source row), or sum += beta * buf. */
WIDE_LOOP static void weigh_row(const float *restrict buf, float beta, Py_ssize_t count,
                                int starts, float *restrict sum)
{
    if (starts)
        for (Py_ssize_t i = 0; i < count; i++)
            sum[i] = beta * buf[i];
    else
        for (Py_ssize_t i = 0; i < count; i++)
            sum[i] += beta * buf[i];
}

int area_resize(const Canvas *canvas, double fx, double fy, Output out)
{
    Py_ssize_t width = canvas->width, height = canvas->height;
    Py_ssize_t row_floats = 3 * out.width;
    int status = -1;
    Tap *xtaps = PyMem_RawMalloc(sizeof(Tap) * 2 * (size_t)width);
    Tap *ytaps = PyMem_RawMalloc(sizeof(Tap) * 2 * (size_t)height);
    /* the row's sums (and the float past them that the vectors write), the output row's */
    float *buf = PyMem_RawMalloc(sizeof(float) * (2 * (size_t)row_floats + 1));
    float *line = PyMem_RawCalloc(3 * (size_t)width + 1, sizeof(float));  /* its spare: 0 */
    Py_ssize_t *first = PyMem_RawMalloc(sizeof(Py_ssize_t) * 2 * (size_t)out.width);
    if (!xtaps || !ytaps || !buf || !line || !first)
        goto release;
    float *sum = buf + row_floats + 1, *pixels = out.pixels;
    Py_ssize_t *stop = first + out.width;
    /* OpenCV's scales: the reciprocals of the factors it was given */
    Py_ssize_t nx = area_taps(width, out.width, 1.0 / fx, xtaps);
    Py_ssize_t ny = area_taps(height, out.height, 1.0 / fy, ytaps);
    taps_on_image(xtaps, nx, out.width, canvas, first, stop);
    Py_ssize_t buffered = -1, previous = ny ? ytaps[0].out : 0;
    memset(sum, 0, sizeof(float) * (size_t)row_floats);
    for (Py_ssize_t j = 0; j < ny; j++) {
        float beta = ytaps[j].alpha;
        Py_ssize_t row = ytaps[j].src;
        if (row != buffered) {  /* a row read by two outputs is summed once */
            if (row - canvas->y < 0 || row - canvas->y >= canvas->rows) {
                memset(buf, 0, sizeof(float) * (size_t)row_floats);  /* fill: zeros */
            } else {
                canvas_row(canvas, row, line);
                area_across(line, xtaps, first, stop, out.width, buf);
            }
            buffered = row;
        }
        int starts = ytaps[j].out != previous;
        if (starts) {
            memcpy(pixels + previous * out.row_step, sum, sizeof(float) * (size_t)row_floats);
            previous = ytaps[j].out;
        }
        weigh_row(buf, beta, row_floats, starts, sum);
    }
    if (ny)
        memcpy(pixels + previous * out.row_step, sum, sizeof(float) * (size_t)row_floats);
    status = 0;
release:
    PyMem_RawFree(xtaps);
    PyMem_RawFree(ytaps);
    PyMem_RawFree(buf);
    PyMem_RawFree(line);
    PyMem_RawFree(first);
    return status;
}

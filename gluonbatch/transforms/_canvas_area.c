/* OpenCV's area resize (INTER_AREA) of a canvas part that shrinks on both sides, no scale a
 * whole number: OpenCV 4's generic area path step by step. The tables of source cells and
 * their weights in double, cast to float; per source row, each output's taps summed in
 * float in the order of the table; per output row, its source rows weighted and summed in
 * float, the first row's weight times its sums starting the sum. A tap on 0 adds nothing
 * (x + 0 is x for every sum here, none of which is -0), so taps outside the image are
 * skipped and a row outside it is 0. */
#include <math.h>
#include <string.h>

#include "_canvas.h"

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

/* The taps across a row that land on the image: per output, [first, stop) of them (an
 * output's taps are in order of their columns, so those on the image are one run), and
 * per tap its pixel's byte offset in an image row and its weight. */
typedef struct {
    Py_ssize_t *first, *stop, *offset;
    float *alpha;
} Across;

static void across_image(const Tap *taps, Py_ssize_t count, Py_ssize_t outputs,
                         const Canvas *canvas, Across a)
{
    for (Py_ssize_t d = 0; d < outputs; d++)
        a.first[d] = a.stop[d] = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t d = taps[k].out, col = taps[k].src - canvas->x;
        a.offset[k] = col * canvas->col_step;
        a.alpha[k] = taps[k].alpha;
        if (col < 0 || col >= canvas->cols)
            continue;
        if (a.stop[d] == 0)
            a.first[d] = k;
        a.stop[d] = k + 1;
    }
}

/* The taps of one source row of the part into buf (3 floats per output), each output's
 * sums kept in registers: the same additions, in the same order, as OpenCV's buffer. */
static void area_across(const Canvas *canvas, const Across *a, Py_ssize_t row, float *buf,
                        Py_ssize_t outputs)
{
    Py_ssize_t image_row = row - canvas->y;
    if (image_row < 0 || image_row >= canvas->rows) {
        memset(buf, 0, (size_t)outputs * 3 * sizeof(float));
        return;
    }
    const uint8_t *line = canvas->pixels + image_row * canvas->row_step;
    const float *v0 = canvas->values, *v1 = v0 + 256, *v2 = v0 + 512;
    Py_ssize_t step = canvas->channel_step;
    for (Py_ssize_t d = 0; d < outputs; d++) {
        float t0 = 0.0f, t1 = 0.0f, t2 = 0.0f;
        for (Py_ssize_t k = a->first[d]; k < a->stop[d]; k++) {
            const uint8_t *p = line + a->offset[k];
            float alpha = a->alpha[k];
            t0 = t0 + v0[p[0]] * alpha;
            t1 = t1 + v1[p[step]] * alpha;
            t2 = t2 + v2[p[2 * step]] * alpha;
        }
        buf[3 * d] = t0;
        buf[3 * d + 1] = t1;
        buf[3 * d + 2] = t2;
    }
}

int area_resize(const Canvas *canvas, double fx, double fy, Output out)
{
    Py_ssize_t width = canvas->width, height = canvas->height;
    Py_ssize_t row_floats = 3 * out.width;
    int status = -1;
    Tap *xtaps = PyMem_RawMalloc(sizeof(Tap) * 2 * (size_t)width);
    Tap *ytaps = PyMem_RawMalloc(sizeof(Tap) * 2 * (size_t)height);
    float *buf = PyMem_RawMalloc(sizeof(float) * 2 * (size_t)row_floats);
    Py_ssize_t *indices = PyMem_RawMalloc(sizeof(Py_ssize_t) * 2 * (size_t)(out.width + width));
    float *alpha = PyMem_RawMalloc(sizeof(float) * 2 * (size_t)width);
    if (!xtaps || !ytaps || !buf || !indices || !alpha)
        goto release;
    float *sum = buf + row_floats;
    /* OpenCV's scales: the reciprocals of the factors it was given */
    Py_ssize_t nx = area_taps(width, out.width, 1.0 / fx, xtaps);
    Py_ssize_t ny = area_taps(height, out.height, 1.0 / fy, ytaps);
    Across a = {indices, indices + out.width, indices + 2 * out.width, alpha};
    across_image(xtaps, nx, out.width, canvas, a);
    Py_ssize_t buffered = -1, previous = ny ? ytaps[0].out : 0;
    memset(sum, 0, sizeof(float) * (size_t)row_floats);
    for (Py_ssize_t j = 0; j < ny; j++) {
        float beta = ytaps[j].alpha;
        if (ytaps[j].src != buffered) {  /* a row read by two outputs is summed once */
            area_across(canvas, &a, ytaps[j].src, buf, out.width);
            buffered = ytaps[j].src;
        }
        if (ytaps[j].out != previous) {
            memcpy(out.pixels + previous * row_floats, sum, sizeof(float) * (size_t)row_floats);
            for (Py_ssize_t i = 0; i < row_floats; i++)
                sum[i] = beta * buf[i];
            previous = ytaps[j].out;
        } else {
            for (Py_ssize_t i = 0; i < row_floats; i++)
                sum[i] += beta * buf[i];
        }
    }
    if (ny)
        memcpy(out.pixels + previous * row_floats, sum, sizeof(float) * (size_t)row_floats);
    status = 0;
release:
    PyMem_RawFree(xtaps);
    PyMem_RawFree(ytaps);
    PyMem_RawFree(buf);
    PyMem_RawFree(indices);
    PyMem_RawFree(alpha);
    return status;
}

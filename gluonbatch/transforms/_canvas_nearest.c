/* OpenCV's nearest neighbour resize (INTER_NEAREST, its resizeNN) of a canvas part: output
 * d takes source pixel floor(d * scale), at most the last, per side; the pixel's values
 * as they are. */

#include "_canvas.h"

#include <math.h>
#include <string.h>

#define FILL PY_SSIZE_T_MIN  /* no byte offset in a row is this */

int nearest_resize(const Canvas *canvas, double fx, double fy, Output out)
{
    /* per output column, its pixel's byte offset in an image row (of any sign), or FILL */
    Py_ssize_t *offsets = PyMem_RawMalloc(sizeof(Py_ssize_t) * (size_t)out.width);
    if (!offsets)
        return -1;
    /* OpenCV's resizeNN: floor(d / factor), at most the last pixel */
    double xscale = 1.0 / fx, yscale = 1.0 / fy;
    for (Py_ssize_t d = 0; d < out.width; d++) {
        Py_ssize_t s = (Py_ssize_t)floor((double)d * xscale);
        Py_ssize_t col = (s < canvas->width - 1 ? s : canvas->width - 1) - canvas->x;
        offsets[d] = col < 0 || col >= canvas->cols ? FILL : col * canvas->col_step;
    }
    const float *v0 = canvas->values, *v1 = v0 + 256, *v2 = v0 + 512;
    Py_ssize_t step = canvas->channel_step, row_floats = 3 * out.width, previous = -1;
    for (Py_ssize_t d = 0; d < out.height; d++) {
        float *o = out.pixels + out.row_step * d;
        Py_ssize_t s = (Py_ssize_t)floor((double)d * yscale);
        Py_ssize_t row = s < canvas->height - 1 ? s : canvas->height - 1;
        if (row == previous) {  /* the row above's source row */
            memcpy(o, o - out.row_step, sizeof(float) * (size_t)row_floats);
            continue;
        }
        previous = row;
        Py_ssize_t image_row = row - canvas->y;
        if (image_row < 0 || image_row >= canvas->rows) {
            memset(o, 0, sizeof(float) * (size_t)row_floats);
            continue;
        }
        const uint8_t *line = canvas->pixels + image_row * canvas->row_step;
        for (Py_ssize_t x = 0; x < out.width; x++, o += 3) {
            if (offsets[x] == FILL) {
                o[0] = o[1] = o[2] = 0.0f;
                continue;
            }
            const uint8_t *q = line + offsets[x];
            o[0] = v0[q[0]];
            o[1] = v1[q[step]];
            o[2] = v2[q[2 * step]];
        }
    }
    PyMem_RawFree(offsets);
    return 0;
}

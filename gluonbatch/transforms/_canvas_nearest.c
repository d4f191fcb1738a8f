/* OpenCV's nearest neighbour resize (INTER_NEAREST, its resizeNN) of a canvas part: output
 * d takes source pixel floor(d * scale), at most the last, per side; the pixel's values
 * as they are. */
#include <math.h>
#include <string.h>

#include "_canvas.h"

int nearest_resize(const Canvas *canvas, double fx, double fy, Output out)
{
    Py_ssize_t *cols = PyMem_RawMalloc(sizeof(Py_ssize_t) * (size_t)out.width);
    if (!cols)
        return -1;
    /* OpenCV's resizeNN: floor(d / factor), at most the last pixel */
    double xscale = 1.0 / fx, yscale = 1.0 / fy;
    for (Py_ssize_t d = 0; d < out.width; d++) {
        Py_ssize_t s = (Py_ssize_t)floor((double)d * xscale);
        cols[d] = (s < canvas->width - 1 ? s : canvas->width - 1) - canvas->x;
    }
    const float *v0 = canvas->values, *v1 = v0 + 256, *v2 = v0 + 512;
    for (Py_ssize_t d = 0; d < out.height; d++) {
        float *o = out.pixels + 3 * out.width * d;
        Py_ssize_t s = (Py_ssize_t)floor((double)d * yscale);
        Py_ssize_t image_row = (s < canvas->height - 1 ? s : canvas->height - 1) - canvas->y;
        memset(o, 0, sizeof(float) * 3 * (size_t)out.width);
        if (image_row < 0 || image_row >= canvas->rows)
            continue;
        const uint8_t *line = canvas->pixels + image_row * canvas->row_step;
        for (Py_ssize_t x = 0; x < out.width; x++) {
            if (cols[x] < 0 || cols[x] >= canvas->cols)
                continue;
            const uint8_t *q = line + cols[x] * canvas->col_step;
            o[3 * x] = v0[q[0]];
            o[3 * x + 1] = v1[q[canvas->channel_step]];
            o[3 * x + 2] = v2[q[2 * canvas->channel_step]];
        }
    }
    PyMem_RawFree(cols);
    return 0;
}

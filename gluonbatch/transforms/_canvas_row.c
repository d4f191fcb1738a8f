/* A row of a canvas part as float values (see _canvas.h). */
#include "_canvas.h"

void canvas_row(const Canvas *c, Py_ssize_t row, float *out)
{
    memset(out, 0, sizeof(float) * (3 * (size_t)c->width + 1));
    Py_ssize_t image_row = row - c->y;
    if (image_row < 0 || image_row >= c->rows)
        return;
    const uint8_t *line = c->pixels + image_row * c->row_step;
    const float *v0 = c->values, *v1 = v0 + 256, *v2 = v0 + 512;
    Py_ssize_t start = c->x > 0 ? c->x : 0, stop = c->x + c->cols;
    if (stop > c->width)
        stop = c->width;
    for (Py_ssize_t col = start; col < stop; col++) {
        const uint8_t *q = line + (col - c->x) * c->col_step;
        out[3 * col] = v0[q[0]];
        out[3 * col + 1] = v1[q[c->channel_step]];
        out[3 * col + 2] = v2[q[2 * c->channel_step]];
    }
}

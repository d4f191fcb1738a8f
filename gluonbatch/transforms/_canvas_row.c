/* A row of a canvas part as float values (see _canvas.h). */
#include "_canvas.h"

int plain_values(const float *values)
{
    for (int i = 0; i < 3 * 256; i++)
        if (values[i] != (float)(i & 255))
            return 0;
    return 1;
}

void canvas_row(const Canvas *c, Py_ssize_t row, float *out)
{
    Py_ssize_t image_row = row - c->y;
    Py_ssize_t start = c->x > 0 ? c->x : 0, stop = c->x + c->cols;
    if (stop > c->width)
        stop = c->width;
    if (image_row < 0 || image_row >= c->rows || start >= stop) {
        memset(out, 0, sizeof(float) * 3 * (size_t)c->width);
        return;
    }
    memset(out, 0, sizeof(float) * 3 * (size_t)start);
    memset(out + 3 * stop, 0, sizeof(float) * 3 * (size_t)(c->width - stop));
    const uint8_t *q = c->pixels + image_row * c->row_step + (start - c->x) * c->col_step;
    float *o = out + 3 * start;
    Py_ssize_t count = stop - start;
    if (c->col_step == 3 && c->channel_step == 1 && c->plain) {
        /* the bytes of the row in order, converted: the compiler's vector loop */
        for (Py_ssize_t i = 0; i < 3 * count; i++)
            o[i] = (float)q[i];
        return;
    }
    const float *v0 = c->values, *v1 = v0 + 256, *v2 = v0 + 512;
    Py_ssize_t col_step = c->col_step, channel_step = c->channel_step;
    for (Py_ssize_t i = 0; i < count; i++, q += col_step, o += 3) {
        o[0] = v0[q[0]];
        o[1] = v1[q[channel_step]];
        o[2] = v2[q[2 * channel_step]];
    }
}

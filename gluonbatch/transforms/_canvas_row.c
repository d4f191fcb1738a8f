/* A row of a canvas part as float values (see _canvas.h). */
#include "_canvas.h"

#include <math.h>

void describe_values(Canvas *c)
{
    c->affine = 1;
    for (int ch = 0; ch < 3; ch++) {
        const float *v = c->values + 256 * ch;
        c->shift[ch] = -v[0];
        if (!isfinite(v[0]))  /* a NaN's sign: the compiler may add -shift for the check */
            c->affine = 0;
        for (int byte = 0; byte < 256; byte++) {
            float value = (float)byte - c->shift[ch];
            if (memcmp(&value, v + byte, sizeof value) != 0)  /* bits: a -0 differs */
                c->affine = 0;
        }
    }
}

/* n bytes of pixels (3 channels each) into floats, minus the channels' shifts: each
 * converted (the compiler's vector loop), then the shifts subtracted 4 pixels at a time,
 * in 3 vectors over which the shifts repeat. */
static void affine_bytes(const uint8_t *q, Py_ssize_t n, const float *s, float *o)
{
    for (Py_ssize_t k = 0; k < n; k++)
        o[k] = (float)q[k];
    if (s[0] == 0 && s[1] == 0 && s[2] == 0)
        return;
    Floats4 s0 = {s[0], s[1], s[2], s[0]}, s1 = {s[1], s[2], s[0], s[1]},
            s2 = {s[2], s[0], s[1], s[2]};
    Py_ssize_t i = 0;
    for (; i + 12 <= n; i += 12) {
        Floats4 a = load4(o + i) - s0, b = load4(o + i + 4) - s1, d = load4(o + i + 8) - s2;
        memcpy(o + i, &a, sizeof a);
        memcpy(o + i + 4, &b, sizeof b);
        memcpy(o + i + 8, &d, sizeof d);
    }
    for (; i < n; i++)
        o[i] -= s[i % 3];
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
    Py_ssize_t col_step = c->col_step, channel_step = c->channel_step;
    if (col_step == 3 && channel_step == 1 && c->affine) {
        affine_bytes(q, 3 * count, c->shift, o);
        return;
    }
    /* other steps (a mirrored row's, say) from the table: converting and subtracting
     * pixel by pixel, or in order and then mirroring, was slower */
    const float *v0 = c->values, *v1 = v0 + 256, *v2 = v0 + 512;
    for (Py_ssize_t i = 0; i < count; i++, q += col_step, o += 3) {
        o[0] = v0[q[0]];
        o[1] = v1[q[channel_step]];
        o[2] = v2[q[2 * channel_step]];
    }
}

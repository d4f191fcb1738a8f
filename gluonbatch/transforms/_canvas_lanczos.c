/* OpenCV's Lanczos resize (INTER_LANCZOS4) of a canvas part, as OpenCV 4's generic float32
 * path computes it. Each output's position and 8 weights as interpolateLanczos4 computes
 * them. Per source row of the part (rows past its ends clamped to them): an output whose 8
 * taps all lie on the row sums them left to right, its 3 channels in the lanes of one
 * vector; the others start from 0 and clamp their taps to the row's ends. Per output row,
 * the 8 weighted rows summed right to left where OpenCV's vector loop runs (all but the
 * row's last len % lanes values) and left to right in its scalar tail. Every tap is
 * computed, fill included. (OpenCV's build hands linear and cubic float32 resizes to IPP,
 * whose sums are its own: those are not repeated here.) */

#include "_canvas.h"

#include <math.h>
#include <string.h>

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
        if (fabsf(y0_) >= 1e-6f) {  /* OpenCV 4's bound, not FLT_EPSILON */
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

/* Each output's pixel (its first tap's plus 3) and 8 weights. */
static void positions(Py_ssize_t outputs, double scale, Py_ssize_t *pixel, float *weights)
{
    for (Py_ssize_t d = 0; d < outputs; d++) {
        float f = (float)((d + 0.5) * scale - 0.5);
        Py_ssize_t s = (Py_ssize_t)floorf(f);
        pixel[d] = s;
        lanczos_weights(f - (float)s, weights + 8 * d);
    }
}

/* OpenCV's HResizeLanczos4 over one row of values (`width` pixels): 3 floats per output
 * into `out`, and possibly one float past them. */
static void across(const float *row, Py_ssize_t width, const Py_ssize_t *pixel,
                   const float *weights, Py_ssize_t outputs, float *out)
{
    for (Py_ssize_t d = 0; d < outputs; d++) {
        const float *w = weights + 8 * d;
        Py_ssize_t s = pixel[d] - 3;
        if (s >= 0 && s + 8 <= width) {
            const float *t = row + 3 * s;
            Floats4 v = load4(t) * w[0];
            v = v + load4(t + 3) * w[1];
            v = v + load4(t + 6) * w[2];
            v = v + load4(t + 9) * w[3];
            v = v + load4(t + 12) * w[4];
            v = v + load4(t + 15) * w[5];
            v = v + load4(t + 18) * w[6];
            v = v + load4(t + 21) * w[7];
            memcpy(out + 3 * d, &v, sizeof v);  /* its 4th float: the next output's, or spare */
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
WIDE_LOOP static void down(const float *const *r, const float *w, Py_ssize_t count,
                           Py_ssize_t lanes, float *restrict out)
{
    Py_ssize_t body = count - count % lanes, i;
    for (i = 0; i < body; i++)
        out[i] = r[0][i] * w[0] + (r[1][i] * w[1] + (r[2][i] * w[2] + (r[3][i] * w[3]
                 + (r[4][i] * w[4] + (r[5][i] * w[5] + (r[6][i] * w[6] + r[7][i] * w[7]))))));
    for (; i < count; i++)
        out[i] = r[0][i] * w[0] + r[1][i] * w[1] + r[2][i] * w[2] + r[3][i] * w[3]
                 + r[4][i] * w[4] + r[5][i] * w[5] + r[6][i] * w[6] + r[7][i] * w[7];
}

int lanczos_resize(const Canvas *canvas, Py_ssize_t lanes, double fx, double fy, Output out)
{
    int status = -1;
    Py_ssize_t width = canvas->width, height = canvas->height;
    Py_ssize_t count = 3 * out.width, stride = count + 1;  /* a spare float after each row */
    Py_ssize_t *xpixel = PyMem_RawMalloc(sizeof(Py_ssize_t) * (size_t)(out.width + out.height));
    float *weights = PyMem_RawMalloc(sizeof(float) * 8 * (size_t)(out.width + out.height));
    float *line = PyMem_RawCalloc(3 * (size_t)width + 1, sizeof(float));  /* its spare: 0 */
    /* rows across, in 8 slots by source row modulo 8, and the row of fill's */
    float *rows_across = PyMem_RawMalloc(sizeof(float) * 9 * (size_t)stride);
    if (!xpixel || !weights || !line || !rows_across)
        goto release;
    Py_ssize_t *ypixel = xpixel + out.width;
    float *xweights = weights, *yweights = weights + 8 * out.width;
    /* OpenCV's scales: the reciprocals of the factors it was given */
    positions(out.width, 1.0 / fx, xpixel, xweights);
    positions(out.height, 1.0 / fy, ypixel, yweights);
    Py_ssize_t held[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    float *fill = rows_across + 8 * stride;
    int fill_done = 0;
    for (Py_ssize_t d = 0; d < out.height; d++) {
        const float *rows[8];
        for (int k = 0; k < 8; k++) {
            Py_ssize_t r = ypixel[d] - 3 + k;
            r = r < 0 ? 0 : (r >= height ? height - 1 : r);
            if (r - canvas->y < 0 || r - canvas->y >= canvas->rows) {  /* all fill */
                if (!fill_done) {
                    memset(line, 0, sizeof(float) * (3 * (size_t)width + 1));
                    across(line, width, xpixel, xweights, out.width, fill);
                    fill_done = 1;
                }
                rows[k] = fill;
                continue;
            }
            float *slot = rows_across + (r & 7) * stride;
            if (held[r & 7] != r) {
                canvas_row(canvas, r, line);
                across(line, width, xpixel, xweights, out.width, slot);
                held[r & 7] = r;
            }
            rows[k] = slot;
        }
        down(rows, yweights + 8 * d, count, lanes, out.pixels + d * out.row_step);
    }
    status = 0;
release:
    PyMem_RawFree(xpixel);
    PyMem_RawFree(weights);
    PyMem_RawFree(line);
    PyMem_RawFree(rows_across);
    return status;
}

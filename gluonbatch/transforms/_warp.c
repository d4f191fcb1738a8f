/* OpenCV's warpAffine of a uint8 image with bilinear sampling and a border of 0
 * (cv2.warpAffine(src, m, size, flags=cv2.INTER_LINEAR)), compiled: see affine.py's
 * warp_image. OpenCV inverts the 2x3 map in double, then walks the output in fixed point:
 * per output row the row's part of the source position, rounded to 1/1024 of a pixel, plus
 * per column its own part, also rounded; their sum taken to 1/32 of a pixel gives the
 * source pixel and a fraction, whose four bilinear weights sum to 2**15; the weighted sum
 * of the four pixels (0 outside the image) is rounded to the nearest byte. All of it is
 * integer arithmetic but the two roundings per row and column, done here in the same
 * double arithmetic (no fused multiply-add), so the bytes are OpenCV's by construction;
 * the caller checks that at import as well. Only maps without rotation or shear, as
 * OpenCV rounds them, are computed here (see warp_aligned); others are OpenCV's. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* the vector code: x86-64 (SSE2, and 64-bit moves into vectors) */
#if defined(__x86_64__) && defined(__SSE2__)
#define WARP_SSE2 1
#include <emmintrin.h>
#else
#define WARP_SSE2 0
#endif

#define AB_BITS 10    /* a position's fraction in the map's rounding: 1/1024 */
#define INTER_BITS 5  /* a position's fraction in sampling: 1/32 */
#define TAB 32        /* fractions per side */
#define COEF_BITS 15  /* the bilinear weights sum to 2**15 */

/* OpenCV's round of a double to an int, ties to even (within the ints' range: warp's
 * guard keeps every value under 2**29). */
static int round_int(double v)
{
    return (int)lrint(v);
}

static int16_t saturate_short(int v)
{
    return (int16_t)(v < INT16_MIN ? INT16_MIN : (v > INT16_MAX ? INT16_MAX : v));
}

/* The weights are multiples of 32 (products of 1/32 steps): divided by 32 they fit 16
 * bits, and (sum * 32 + 2**14) >> 15 is (sum + 2**9) >> 10. */
#define SMALL_BITS (COEF_BITS - INTER_BITS)

/* OpenCV's inverse of the forward map, in its order of operations. */
static void invert(const double *forward, double *m)
{
    memcpy(m, forward, 6 * sizeof(double));
    double d = m[0] * m[4] - m[1] * m[3];
    d = d != 0 ? 1. / d : 0;
    double a11 = m[4] * d, a22 = m[0] * d;
    m[0] = a11;
    m[1] *= -d;
    m[3] *= -d;
    m[4] = a22;
    double b1 = -m[0] * m[2] - m[1] * m[5];
    double b2 = -m[3] * m[2] - m[4] * m[5];
    m[2] = b1;
    m[5] = b2;
}

/* A source position to 1/32 of a pixel: the row's part plus the column's, added as OpenCV
 * adds the two ints (unsigned here, wrapping as its build does), shifted. */
static inline int fine(int row_part, int column_part)
{
    return (int)((unsigned)row_part + (unsigned)column_part) >> (AB_BITS - INTER_BITS);
}

/* A column's weights for its two pixels' 3 bytes: 32 - fx three times, fx three times. */
#if WARP_SSE2
typedef __m128i Weights;
#else
typedef int Weights;
#endif

/* Source row r interpolated across at each output column (`sx`, `fx` per column): the
 * exact integer a * (32 - fx) + b * fx of its two pixels (0 outside the image), or all 0
 * for a row outside it. Columns [inner_lo, inner_hi) have both pixels inside, and 2
 * readable bytes past them (`weights` theirs); `h` has a spare value after its 3 per
 * column. */
static void across(const uint8_t *src, Py_ssize_t src_step, int width, int height, int r,
                   const int *sx, const int *fx, const Weights *weights, Py_ssize_t out_width,
                   Py_ssize_t inner_lo, Py_ssize_t inner_hi, int16_t *h)
{
    if (r < 0 || r >= height) {
        memset(h, 0, sizeof(int16_t) * 3 * (size_t)out_width);
        return;
    }
    const uint8_t *row = src + r * src_step;
    for (Py_ssize_t x = 0; x < out_width; x++) {
        int left = sx[x], f = fx[x];
        if (x >= inner_lo && x < inner_hi) {
#if WARP_SSE2
            uint64_t pair;
            memcpy(&pair, row + 3 * left, 8);
            __m128i v = _mm_unpacklo_epi8(_mm_cvtsi64_si128((long long)pair),
                                          _mm_setzero_si128());
            v = _mm_mullo_epi16(v, weights[x]);  /* at most 255 * 32: no overflow */
            v = _mm_add_epi16(v, _mm_srli_si128(v, 6));  /* a * (32 - f) + b * f, lanes 0-2 */
            _mm_storel_epi64((__m128i *)(h + 3 * x), v);  /* its 4th value: the spare */
            continue;
#endif
        }
        for (int k = 0; k < 3; k++) {
            int a = left >= 0 && left < width ? row[3 * left + k] : 0;
            int b = left + 1 >= 0 && left + 1 < width ? row[3 * left + 3 + k] : 0;
            h[3 * x + k] = (int16_t)(a * (TAB - f) + b * f);
        }
    }
}

/* Two rows across summed down with the weights 32 - fy and fy, rounded to bytes. */
static void down(const int16_t *top, const int16_t *bottom, int fy, size_t n, uint8_t *o)
{
    size_t i = 0;
#if WARP_SSE2
    /* top and bottom values side by side, each pair multiplied and added in 32 bits */
    __m128i w = _mm_set1_epi32((int)(((unsigned)fy << 16) | (unsigned)(TAB - fy)));
    __m128i half = _mm_set1_epi32(1 << (SMALL_BITS - 1));
    for (; i + 16 <= n; i += 16) {
        __m128i sums[4];
        for (int j = 0; j < 2; j++) {
            __m128i t = _mm_loadu_si128((const __m128i *)(top + i + 8 * j));
            __m128i b = _mm_loadu_si128((const __m128i *)(bottom + i + 8 * j));
            sums[2 * j] = _mm_madd_epi16(_mm_unpacklo_epi16(t, b), w);
            sums[2 * j + 1] = _mm_madd_epi16(_mm_unpackhi_epi16(t, b), w);
        }
        for (int j = 0; j < 4; j++)
            sums[j] = _mm_srai_epi32(_mm_add_epi32(sums[j], half), SMALL_BITS);
        __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(sums[0], sums[1]),
                                         _mm_packs_epi32(sums[2], sums[3]));
        _mm_storeu_si128((__m128i *)(o + i), bytes);
    }
#endif
    for (; i < n; i++)
        o[i] = (uint8_t)((top[i] * (TAB - fy) + bottom[i] * fy + (1 << (SMALL_BITS - 1)))
                         >> SMALL_BITS);
}

/* A map without rotation or shear, as OpenCV rounds it: every row's columns fall on the
 * same source columns and every column's rows on its row's, so the four-pixel sums
 * factor exactly into sums across two source rows (each computed once) and one sum down,
 * (top * (32 - fy) + bottom * fy + 2**9) >> 10: the same integers, in another order. */
static int warp_aligned(const uint8_t *src, Py_ssize_t src_step, int width, int height,
                        int row_x, const int *rows_y, const int *column_x,
                        uint8_t *out, Py_ssize_t out_width, Py_ssize_t out_height)
{
    size_t n = 3 * (size_t)out_width, stride = n + 1;  /* a spare value after each row */
    int *sx = PyMem_RawMalloc(sizeof(int) * 2 * (size_t)out_width);
    int16_t *held = PyMem_RawMalloc(sizeof(int16_t) * 2 * stride);
    Weights *weights = PyMem_RawMalloc(sizeof(Weights) * (size_t)out_width);
    if (!sx || !held || !weights) {
        PyMem_RawFree(sx);
        PyMem_RawFree(held);
        PyMem_RawFree(weights);
        return -1;
    }
    int *fx = sx + out_width;
    /* the columns read within the image, 8 bytes from their left pixel (a run: the
     * columns' source pixels move one way) */
    Py_ssize_t inner_lo = out_width, inner_hi = 0;
    for (Py_ssize_t x = 0; x < out_width; x++) {
        int f = fine(row_x, column_x[x]);
        sx[x] = saturate_short(f >> INTER_BITS);
        fx[x] = f & (TAB - 1);
#if WARP_SSE2
        short g = (short)(TAB - fx[x]), h = (short)fx[x];
        weights[x] = _mm_set_epi16(0, 0, h, h, h, g, g, g);
#endif
        if (sx[x] >= 0 && sx[x] < width - 2) {
            inner_lo = x < inner_lo ? x : inner_lo;
            inner_hi = x + 1;
        }
    }
    for (Py_ssize_t x = inner_lo; x < inner_hi; x++)
        if (!(sx[x] >= 0 && sx[x] < width - 2))  /* not a run after all: check each */
            inner_hi = inner_lo = 0;
    int held_row[2] = {INT32_MIN, INT32_MIN};  /* the source rows in the two slots */
    for (Py_ssize_t y = 0; y < out_height; y++) {
        int f = fine(rows_y[y], 0);
        int sy = saturate_short(f >> INTER_BITS), fy = f & (TAB - 1);
        const int16_t *rows[2];
        for (int k = 0; k < 2; k++) {
            int r = sy + k, slot = r & 1;
            if (held_row[slot] != r) {
                across(src, src_step, width, height, r, sx, fx, weights, out_width,
                       inner_lo, inner_hi, held + slot * stride);
                held_row[slot] = r;
            }
            rows[k] = held + slot * stride;
        }
        down(rows[0], rows[1], fy, n, out + y * n);
    }
    PyMem_RawFree(sx);
    PyMem_RawFree(held);
    PyMem_RawFree(weights);
    return 0;
}

/* The warp: per row and per column OpenCV's rounded parts of the source position, then
 * the aligned path where every row has the same part across (row_x) and no column a part
 * down, so that only the columns' parts across and the rows' parts down are kept (in
 * `parts`). 1 when done; 0 for other maps and for maps whose positions come near the
 * ints' range (OpenCV's to compute, its sums may overflow there); -1 without memory. */
static int warp(const uint8_t *src, Py_ssize_t src_step, int width, int height,
                const double *forward, uint8_t *out, Py_ssize_t out_width,
                Py_ssize_t out_height, int *parts)
{
    double m[6];
    invert(forward, m);
    double last_y = (double)(out_height - 1);
    double columns = fmax(fabs(m[0]), fabs(m[3])) * (double)out_width;
    double rows = fmax(fmax(fabs(m[2]), fabs(m[1] * last_y + m[2])),
                       fmax(fabs(m[5]), fabs(m[4] * last_y + m[5])));
    if (!((columns + rows) * (1 << AB_BITS) < (double)(1 << 29)))  /* nan included */
        return 0;
    int *column_x = parts, *rows_y = parts + out_width;
    int aligned = 1;
    for (Py_ssize_t x = 0; x < out_width; x++) {
        column_x[x] = round_int(m[0] * (double)x * (1 << AB_BITS));
        aligned &= round_int(m[3] * (double)x * (1 << AB_BITS)) == 0;
    }
    const int round_delta = (1 << AB_BITS) / TAB / 2;
    const int row_x = round_int(m[2] * (1 << AB_BITS)) + round_delta;  /* row 0's */
    for (Py_ssize_t y = 0; y < out_height; y++) {
        rows_y[y] = round_int((m[4] * (double)y + m[5]) * (1 << AB_BITS)) + round_delta;
        int across = round_int((m[1] * (double)y + m[2]) * (1 << AB_BITS)) + round_delta;
        aligned &= across == row_x;
    }
    if (!aligned)  /* turned or sheared: OpenCV's own per-pixel path is as fast */
        return 0;
    return warp_aligned(src, src_step, width, height, row_x, rows_y, column_x, out,
                        out_width, out_height) < 0 ? -1 : 1;
}

static PyObject *warp_affine(PyObject *self, PyObject *args)
{
    PyObject *src_obj, *out_obj;
    double m[6];
    if (!PyArg_ParseTuple(args, "O(dddddd)O", &src_obj, &m[0], &m[1], &m[2], &m[3], &m[4],
                          &m[5], &out_obj))
        return NULL;
    Py_buffer src, out;
    if (PyObject_GetBuffer(src_obj, &src, PyBUF_STRIDES | PyBUF_FORMAT) < 0)
        return NULL;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE
                           | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&src);
        return NULL;
    }
    PyObject *result = NULL;
    int *parts = NULL;
    if (strcmp(src.format, "B") != 0 || strcmp(out.format, "B") != 0) {
        PyErr_SetString(PyExc_TypeError, "src and out must hold uint8 items");
        goto release;
    }
    if (src.ndim != 3 || src.shape[2] != 3 || src.strides[2] != 1 || src.strides[1] != 3
            || src.strides[0] < 3 * src.shape[1] || src.shape[0] >= INT16_MAX
            || src.shape[1] >= INT16_MAX || out.ndim != 3 || out.shape[2] != 3
            || out.shape[0] >= INT16_MAX || out.shape[1] >= INT16_MAX) {
        PyErr_SetString(PyExc_ValueError, "src must be (H, W, 3) with rows of adjacent "
                        "pixels, out (H, W, 3) C-contiguous, sides below 2**15 - 1");
        goto release;
    }
    /* per column its part of the source position across, per row its part down */
    size_t count = (size_t)(out.shape[0] + out.shape[1]);
    if (!(parts = PyMem_Malloc(sizeof(int) * (count + 1)))) {
        PyErr_NoMemory();
        goto release;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = warp(src.buf, src.strides[0], (int)src.shape[1], (int)src.shape[0], m, out.buf,
                  out.shape[1], out.shape[0], parts);
    Py_END_ALLOW_THREADS
    if (status < 0) {
        PyErr_NoMemory();
        goto release;
    }
    result = PyBool_FromLong(status);
release:
    PyMem_Free(parts);
    PyBuffer_Release(&out);
    PyBuffer_Release(&src);
    return result;
}

static PyMethodDef methods[] = {
    {"warp_affine", warp_affine, METH_VARARGS,
     "warp_affine(src, m, out)\n\ncv2.warpAffine(src, m, size, flags=cv2.INTER_LINEAR) of the "
     "uint8 (H, W, 3) image src by the 6 doubles m (the forward 2x3 map, row by row) into the "
     "C-contiguous uint8 out: True; False, out unwritten, for a map with rotation or shear "
     "or whose source positions reach 2**19 pixels (OpenCV's to compute); see "
     "gluonbatch.transforms.affine.warp_image."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_warp",
    "OpenCV's bilinear affine warp of a uint8 image, compiled "
    "(gluonbatch.transforms.affine).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__warp(void)
{
    return PyModule_Create(&module);
}

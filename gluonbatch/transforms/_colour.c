/* The presets' last pass, compiled: an HWC image through a 3x4 colour map, mirrored or
 * not, into CHW planes, with cv2.transform's float32 arithmetic (see pixels.py's
 * affine_chw). OpenCV's build runs cv2.transform's vector loop with fused multiply-adds,
 * m0 * x0 + (m1 * x1 + (m2 * x2 + m3)) each rounded once, and its last few pixels
 * otherwise: this computes the first `count` pixels (the loop's), the caller the others.
 * A map it takes for diagonal it applies channel by channel, one fused multiply-add each,
 * every pixel alike.
 * The fused multiply-adds need the processor's FMA instructions: without them, available()
 * is False and nothing is computed here. Also the exact channel sums of a uint8 image
 * (channel_sums), from which the CenterNet jitter's gray mean comes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_FMA_PATH 1
#else
#define HAVE_FMA_PATH 0
#endif

/* What the processor has for the compiled pass, asked once (it does not change): 0, no FMA
 * (nothing is computed here); 1, FMA and SSE4.1; 2, AVX2 as well. */
static int vector_level(void)
{
#if HAVE_FMA_PATH
    static int level = -1;
    if (level < 0) {
        __builtin_cpu_init();
        level = !(__builtin_cpu_supports("fma") && __builtin_cpu_supports("sse4.1")) ? 0
                : __builtin_cpu_supports("avx2") ? 2 : 1;
    }
    return level;
#else
    return 0;
#endif
}

#if HAVE_FMA_PATH

/* Four floats at `low` and four at `high`, the halves of one vector. */
__attribute__((target("avx2,fma")))
static inline __m256 halves(const float *low, const float *high)
{
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(low)), _mm_loadu_ps(high),
                                1);
}

/* Pixels [0, n) of one row as row_pass computes them, eight at a time with AVX2 (each
 * 128-bit half holds four pixels and goes through row_pass's steps); returns how many
 * it computed, a multiple of 8. */
__attribute__((target("avx2,fma")))
static Py_ssize_t row_pass_wide(const float *src, Py_ssize_t n, Py_ssize_t width,
                                const float *m, int diagonal, int flip, float *const *out)
{
    __m256 w[12];
    for (int i = 0; i < 12; i++)
        w[i] = _mm256_set1_ps(m[i]);
    Py_ssize_t x = 0;
    for (; x + 8 <= n; x += 8) {
        const float *p = src + 3 * x;
        __m256 a = halves(p, p + 12), b = halves(p + 4, p + 16), c = halves(p + 8, p + 20);
        __m256 t = _mm256_blend_ps(_mm256_blend_ps(a, b, 0x44), c, 0x22);
        __m256 x0 = _mm256_shuffle_ps(t, t, _MM_SHUFFLE(1, 2, 3, 0));
        t = _mm256_blend_ps(_mm256_blend_ps(a, b, 0x99), c, 0x44);
        __m256 x1 = _mm256_shuffle_ps(t, t, _MM_SHUFFLE(2, 3, 0, 1));
        t = _mm256_blend_ps(_mm256_blend_ps(a, b, 0x22), c, 0x99);
        __m256 x2 = _mm256_shuffle_ps(t, t, _MM_SHUFFLE(3, 0, 1, 2));
        __m256 y[3];
        if (diagonal) {
            y[0] = _mm256_fmadd_ps(x0, w[0], w[3]);
            y[1] = _mm256_fmadd_ps(x1, w[5], w[7]);
            y[2] = _mm256_fmadd_ps(x2, w[10], w[11]);
        } else {
            for (int k = 0; k < 3; k++)
                y[k] = _mm256_fmadd_ps(x0, w[4 * k], _mm256_fmadd_ps(
                    x1, w[4 * k + 1], _mm256_fmadd_ps(x2, w[4 * k + 2], w[4 * k + 3])));
        }
        for (int k = 0; k < 3; k++) {
            if (flip) {  /* each half reversed, then the halves swapped */
                __m256 r = _mm256_permute_ps(y[k], _MM_SHUFFLE(0, 1, 2, 3));
                _mm256_storeu_ps(out[k] + width - x - 8, _mm256_permute2f128_ps(r, r, 1));
            } else {
                _mm256_storeu_ps(out[k] + x, y[k]);
            }
        }
    }
    return x;
}

/* Pixels [0, n) of one row (`width` pixels of 3 floats) through the map into the output
 * row, mirrored if `flip`: eight at a time where the processor has AVX2, then four at a
 * time (their channels deinterleaved into three vectors), then one at a time. A
 * `diagonal` map scales each channel on its own, as cv2.transform does then:
 * m[5k] * x_k + m[4k + 3], one fused multiply-add. */
__attribute__((target("sse4.1,fma")))
static void row_pass(const float *src, Py_ssize_t n, Py_ssize_t width, const float *m,
                     int diagonal, int flip, float *const *out)
{
    __m128 m0 = _mm_set1_ps(m[0]), m1 = _mm_set1_ps(m[1]), m2 = _mm_set1_ps(m[2]);
    __m128 m3 = _mm_set1_ps(m[3]), m4 = _mm_set1_ps(m[4]), m5 = _mm_set1_ps(m[5]);
    __m128 m6 = _mm_set1_ps(m[6]), m7 = _mm_set1_ps(m[7]), m8 = _mm_set1_ps(m[8]);
    __m128 m9 = _mm_set1_ps(m[9]), m10 = _mm_set1_ps(m[10]), m11 = _mm_set1_ps(m[11]);
    Py_ssize_t x = 0;
    if (vector_level() == 2)
        x = row_pass_wide(src, n, width, m, diagonal, flip, out);
    for (; x + 4 <= n; x += 4) {
        const float *p = src + 3 * x;
        __m128 a = _mm_loadu_ps(p), b = _mm_loadu_ps(p + 4), c = _mm_loadu_ps(p + 8);
        /* a = r0 g0 b0 r1, b = g1 b1 r2 g2, c = b2 r3 g3 b3 */
        __m128 t = _mm_blend_ps(_mm_blend_ps(a, b, 0x4), c, 0x2);
        __m128 x0 = _mm_shuffle_ps(t, t, _MM_SHUFFLE(1, 2, 3, 0));
        t = _mm_blend_ps(_mm_blend_ps(a, b, 0x9), c, 0x4);
        __m128 x1 = _mm_shuffle_ps(t, t, _MM_SHUFFLE(2, 3, 0, 1));
        t = _mm_blend_ps(_mm_blend_ps(a, b, 0x2), c, 0x9);
        __m128 x2 = _mm_shuffle_ps(t, t, _MM_SHUFFLE(3, 0, 1, 2));
        __m128 y[3];
        if (diagonal) {
            y[0] = _mm_fmadd_ps(x0, m0, m3);
            y[1] = _mm_fmadd_ps(x1, m5, m7);
            y[2] = _mm_fmadd_ps(x2, m10, m11);
        } else {
            y[0] = _mm_fmadd_ps(x0, m0, _mm_fmadd_ps(x1, m1, _mm_fmadd_ps(x2, m2, m3)));
            y[1] = _mm_fmadd_ps(x0, m4, _mm_fmadd_ps(x1, m5, _mm_fmadd_ps(x2, m6, m7)));
            y[2] = _mm_fmadd_ps(x0, m8, _mm_fmadd_ps(x1, m9, _mm_fmadd_ps(x2, m10, m11)));
        }
        for (int k = 0; k < 3; k++) {
            if (flip)
                _mm_storeu_ps(out[k] + width - x - 4, _mm_shuffle_ps(y[k], y[k],
                                                                     _MM_SHUFFLE(0, 1, 2, 3)));
            else
                _mm_storeu_ps(out[k] + x, y[k]);
        }
    }
    for (; x < n; x++) {
        const float *p = src + 3 * x;
        Py_ssize_t at = flip ? width - 1 - x : x;
        for (int k = 0; k < 3; k++) {
            const float *r = m + 4 * k;
            out[k][at] = diagonal ? __builtin_fmaf(p[k], r[k], r[3])
                                  : __builtin_fmaf(p[0], r[0], __builtin_fmaf(p[1], r[1],
                                                   __builtin_fmaf(p[2], r[2], r[3])));
        }
    }
}

#endif

static PyObject *available(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(vector_level() > 0);
}

static PyObject *colour_chw(PyObject *self, PyObject *args)
{
    PyObject *src_obj, *out_obj;
    Py_buffer src, out;
    float m[12];
    int diagonal, flip;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "O(ffffffffffff)ppOn", &src_obj, &m[0], &m[1], &m[2], &m[3],
                          &m[4], &m[5], &m[6], &m[7], &m[8], &m[9], &m[10], &m[11], &diagonal,
                          &flip, &out_obj, &count))
        return NULL;
    if (vector_level() == 0) {
        PyErr_SetString(PyExc_RuntimeError, "this processor has no FMA instructions");
        return NULL;
    }
    if (PyObject_GetBuffer(src_obj, &src, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_STRIDES | PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&src);
        return NULL;
    }
    PyObject *result = NULL;
    if (src.ndim != 3 || src.shape[2] != 3 || (src.itemsize != 4 && src.itemsize != 1)
            || out.ndim != 3 || out.itemsize != 4 || out.shape[0] != 3
            || out.shape[1] != src.shape[0] || out.shape[2] != src.shape[1]
            || out.strides[2] != 4 || out.strides[1] % 4 || out.strides[0] % 4
            || count < 0 || count > src.shape[0] * src.shape[1]) {
        PyErr_SetString(PyExc_ValueError, "src must be (H, W, 3) float32 or uint8, out (3, H, "
                        "W) float32 with rows of adjacent floats, count at most H * W");
        goto release;
    }
#if HAVE_FMA_PATH
    Py_ssize_t width = src.shape[1];
    float *row = NULL;
    if (src.itemsize == 1 && !(row = PyMem_Malloc(sizeof(float) * 3 * (size_t)width))) {
        PyErr_NoMemory();
        goto release;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r * width < count; r++) {
        Py_ssize_t n = count - r * width < width ? count - r * width : width;
        const float *values;
        if (src.itemsize == 1) {  /* bytes as floats: exact */
            const uint8_t *bytes = (const uint8_t *)src.buf + 3 * width * r;
            for (Py_ssize_t i = 0; i < 3 * n; i++)
                row[i] = bytes[i];
            values = row;
        } else {
            values = (const float *)src.buf + 3 * width * r;
        }
        char *base = (char *)out.buf + r * out.strides[1];
        float *planes[3] = {(float *)base, (float *)(base + out.strides[0]),
                            (float *)(base + 2 * out.strides[0])};
        row_pass(values, n, width, m, diagonal, flip, planes);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(row);
#endif
    result = Py_NewRef(Py_None);
release:
    PyBuffer_Release(&out);
    PyBuffer_Release(&src);
    return result;
}

/* Blocks of 16 pixels (48 bytes) per accumulator round: each of the 48 byte positions
 * has a channel of its own (position % 3), summed lane by lane in 32 bits, flushed into
 * 64 bits before a lane could overflow. */
#define SUM_BLOCK 48
#define SUM_ROUND (((Py_ssize_t)1 << 24) - 1)  /* blocks a round: 255 * 2**24 < 2**32 */

/* The exact sum of each channel of n interleaved 3-channel bytes (any count of them). */
static void sum_channels(const uint8_t *bytes, Py_ssize_t n, uint64_t sums[3])
{
    Py_ssize_t blocks = n * 3 / SUM_BLOCK, done = 0;
    while (done < blocks) {
        Py_ssize_t round = blocks - done < SUM_ROUND ? blocks - done : SUM_ROUND;
        uint32_t lanes[SUM_BLOCK] = {0};
        const uint8_t *p = bytes + done * SUM_BLOCK;
        for (Py_ssize_t b = 0; b < round; b++, p += SUM_BLOCK)
            for (int i = 0; i < SUM_BLOCK; i++)  /* the compiler's vector loop */
                lanes[i] += p[i];
        for (int i = 0; i < SUM_BLOCK; i++)
            sums[i % 3] += lanes[i];
        done += round;
    }
    for (Py_ssize_t i = blocks * SUM_BLOCK; i < 3 * n; i++)
        sums[i % 3] += bytes[i];
}

static PyObject *channel_sums(PyObject *self, PyObject *src_obj)
{
    Py_buffer src;
    if (PyObject_GetBuffer(src_obj, &src, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    PyObject *result = NULL;
    if (strcmp(src.format, "B") != 0 || src.ndim != 3 || src.shape[2] != 3) {
        PyErr_SetString(PyExc_ValueError, "src must be (H, W, 3) uint8");
        goto release;
    }
    uint64_t sums[3] = {0, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    sum_channels(src.buf, src.shape[0] * src.shape[1], sums);
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(KKK)", (unsigned long long)sums[0], (unsigned long long)sums[1],
                           (unsigned long long)sums[2]);
release:
    PyBuffer_Release(&src);
    return result;
}

static PyMethodDef methods[] = {
    {"available", available, METH_NOARGS,
     "available()\n\nWhether this processor has the FMA instructions colour_chw needs."},
    {"colour_chw", colour_chw, METH_VARARGS,
     "colour_chw(src, m, diagonal, flip, out, count)\n\nThe first `count` pixels of the HWC "
     "image src (float32 or uint8) through the 12 floats m (a 3x4 map, row by row; its "
     "diagonal alone if diagonal), mirrored if flip, into the (3, H, W) float32 out; see "
     "gluonbatch.transforms.pixels.affine_chw."},
    {"channel_sums", channel_sums, METH_O,
     "channel_sums(src)\n\nThe exact sum of each channel of the C-contiguous (H, W, 3) "
     "uint8 image src, as 3 ints; see gluonbatch.transforms.jitter.gray_mean."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_colour",
    "The presets' colour pass into CHW planes and a uint8 image's channel sums, compiled "
    "(gluonbatch.transforms.pixels, gluonbatch.transforms.jitter).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__colour(void)
{
    return PyModule_Create(&module);
}

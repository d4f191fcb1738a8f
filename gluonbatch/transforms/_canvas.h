/* The part of an expanded canvas that gluonbatch.transforms.canvas_resize resizes, read
 * from the uint8 image: the kernels' shared declarations (see _canvas_resize.c). */
#ifndef GLUONBATCH_CANVAS_H
#define GLUONBATCH_CANVAS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_core/_wide_loop.h"

/* A part of `width` x `height` pixels holding the image at (x, y): values[c * 256 + byte]
 * where the image shows, 0 elsewhere. */
typedef struct {
    const uint8_t *pixels;                      /* the image's first pixel */
    Py_ssize_t rows, cols;                      /* its size */
    Py_ssize_t row_step, col_step, channel_step;  /* its strides in bytes, any sign */
    Py_ssize_t x, y, width, height;
    const float *values;
    int affine;             /* values[c * 256 + byte] == (float)byte - shift[c], every byte */
    float shift[3];
} Canvas;

/* Sets `affine` and `shift` from `values`: whether each channel's values are the bytes
 * minus one float32, subtracted in float32 (as the crops' own conversion does). */
void describe_values(Canvas *canvas);

/* Four floats, added and multiplied lane by lane (SSE or NEON where there are, each lane
 * IEEE float arithmetic as a scalar's): a pixel's 3 channels and one spare. */
typedef float Floats4 __attribute__((vector_size(16)));

static inline Floats4 load4(const float *p)
{
    Floats4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Row `row` of the part as float values, 3 per pixel: the image's values where it shows,
 * 0 elsewhere. (The kernels' row buffers hold a spare float after them, 0, that their
 * vectors read.) */
void canvas_row(const Canvas *canvas, Py_ssize_t row, float *out);

/* The float32 output of a resize: `height` rows of `width` pixels of 3 floats, each row
 * `row_step` floats after the one before (3 * width, or more in a part of a larger image). */
typedef struct {
    float *pixels;
    Py_ssize_t width, height, row_step;
} Output;

/* Each kernel runs without the GIL and returns -1 where it could not allocate memory. */
int area_resize(const Canvas *canvas, double fx, double fy, Output out);
int lanczos_resize(const Canvas *canvas, Py_ssize_t lanes, double fx, double fy, Output out);
int nearest_resize(const Canvas *canvas, double fx, double fy, Output out);

/* gluoncv's (and OpenCV's) interpolation codes of the kernels. */
enum { NEAREST = 0, AREA = 3, LANCZOS = 4 };

#endif

/* The trial loop of gluoncv's constrained crop, compiled: see crop_trials.py.
 *
 * CPython's random.Random is the 32-bit Mersenne Twister (MT19937). This module reads a
 * generator's state through _random.Random.getstate, draws the very numbers random() and
 * getrandbits() would, runs the trials of every constraint with IEEE double arithmetic in
 * the order the Python code uses (built with -ffp-contract=off: no fused multiply-add), and
 * sets the state it ends in through _random.Random.setstate. No Python code runs in
 * between, so no other thread draws from the generator meanwhile: the call is one draw.
 * A trial it cannot draw exactly as Python would (a size that is not finite or not small,
 * a range that is empty) is left undrawn: the caller goes on with Python's calls from
 * there, which raise what gluoncv's raise.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

#define WORDS 624
#define SHIFT 397

typedef struct {
    uint32_t word[WORDS];
    int next; /* index of the next word to temper; WORDS: twist first */
} Twister;

static uint32_t twisted(uint32_t word, uint32_t next, uint32_t far)
{
    uint32_t joined = (word & 0x80000000U) | (next & 0x7fffffffU);
    uint32_t mixed = far ^ (joined >> 1);
    return (joined & 1U) ? mixed ^ 0x9908b0dfU : mixed;
}

/* The next 624 words, in place: word k from words k, k + 1 and k + 397 (mod 624), in
 * order, so the last ones read words already replaced. */
static void twist(Twister *t)
{
    uint32_t *w = t->word;
    int k = 0;
    for (; k < WORDS - SHIFT; k++)
        w[k] = twisted(w[k], w[k + 1], w[k + SHIFT]);
    for (; k < WORDS - 1; k++)
        w[k] = twisted(w[k], w[k + 1], w[k + SHIFT - WORDS]);
    w[WORDS - 1] = twisted(w[WORDS - 1], w[0], w[SHIFT - 1]);
    t->next = 0;
}

static uint32_t next_word(Twister *t)
{
    if (t->next >= WORDS)
        twist(t);
    uint32_t y = t->word[t->next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= y >> 18;
    return y;
}

/* random.random(): 53 random bits, from two words. */
static double next_double(Twister *t)
{
    uint32_t high = next_word(t) >> 5, low = next_word(t) >> 6;
    return (high * 67108864.0 + low) * (1.0 / 9007199254740992.0);
}

/* random.randrange(n) for 1 <= n < 2**32: getrandbits(n.bit_length()), rejected until
 * below n. */
static int64_t next_below(Twister *t, int64_t n)
{
    int bits = 0;
    for (int64_t rest = n; rest; rest >>= 1)
        bits++;
    uint32_t drawn;
    do {
        drawn = next_word(t) >> (32 - bits);
    } while ((int64_t)drawn >= n);
    return (int64_t)drawn;
}

/* _random.Random's own getstate and setstate: a subclass's, or random.Random's (which
 * wraps them in Python), would run Python code, and let other threads draw meanwhile. */
static PyObject *base_getstate, *base_setstate;

static int read_state(PyObject *rng, Twister *t)
{
    PyObject *state = PyObject_CallOneArg(base_getstate, rng);
    if (state == NULL)
        return -1;
    PyObject *items = PySequence_Fast(state, "the generator's state must be a tuple");
    Py_DECREF(state);
    if (items == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(items) != WORDS + 1) {
        Py_DECREF(items);
        PyErr_SetString(PyExc_ValueError, "the generator's state must hold 625 numbers");
        return -1;
    }
    PyObject **values = PySequence_Fast_ITEMS(items);
    for (int k = 0; k <= WORDS; k++) {
        unsigned long value = PyLong_AsUnsignedLong(values[k]);
        if (value == (unsigned long)-1 && PyErr_Occurred()) {
            Py_DECREF(items);
            return -1;
        }
        if (k < WORDS) {
            t->word[k] = (uint32_t)value;
        } else if (value > WORDS) {
            Py_DECREF(items);
            PyErr_SetString(PyExc_ValueError, "the generator's state has an index past 624");
            return -1;
        } else {
            t->next = (int)value;
        }
    }
    Py_DECREF(items);
    return 0;
}

/* Sets rng's state to t's through `state`, a tuple of WORDS + 1 items allocated before
 * the state was read: ints are not tracked by the garbage collector, so filling it runs
 * no collection (and no finalizer's Python code). */
static int write_state(PyObject *rng, const Twister *t, PyObject *state)
{
    for (int k = 0; k <= WORDS; k++) {
        PyObject *value = PyLong_FromUnsignedLong(k < WORDS ? t->word[k] : (unsigned long)t->next);
        if (value == NULL)
            return -1;
        PyTuple_SET_ITEM(state, k, value);
    }
    PyObject *done = PyObject_CallFunctionObjArgs(base_setstate, rng, state, NULL);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

typedef struct {
    const double *box; /* x0, y0, x1, y1, area per box; NULL: no boxes */
    Py_ssize_t count;
    double area_low, area_high;
} Test;

/* One constraint: its trials, the IoU range, and the area bound (nan: none, inf: no trial
 * can pass; see TrialTest.threshold); then what it found. */
typedef struct {
    long long max_trial;
    double lowest, highest, bound;
    int found;
    int64_t crop[4]; /* x, y, w, h */
} Pass;

static double nearness(double box_area, double area)
{
    return box_area <= area ? box_area / area : area / box_area;
}

/* Whether every box's IoU with the crop is within [lowest, highest] (a nan IoU is not). */
static int crop_passes(const Test *test, int64_t x, int64_t y, int64_t w, int64_t h,
                       double lowest, double highest)
{
    double left = (double)x, top = (double)y;
    double right = (double)(x + w), bottom = (double)(y + h), crop_area = (double)(w * h);
    for (Py_ssize_t k = 0; k < test->count; k++) {
        const double *b = test->box + 5 * k;
        double inner_left = b[0] > left ? b[0] : left;
        double inner_top = b[1] > top ? b[1] : top;
        double inner_right = b[2] < right ? b[2] : right;
        double inner_bottom = b[3] < bottom ? b[3] : bottom;
        double overlap = (inner_left < inner_right && inner_top < inner_bottom)
                             ? (inner_right - inner_left) * (inner_bottom - inner_top) : 0.0;
        double union_area = b[4] + crop_area - overlap;
        double iou = union_area != 0 ? overlap / union_area : NAN;
        if (!(lowest <= iou && iou <= highest))
            return 0;
    }
    return 1;
}

/* The image's sides, and a crop's (whose area then stays exact in a double), that this
 * loop takes: Python's ints are unbounded, these are not. */
#define LARGEST_SIDE 2147483647.0
#define LARGEST_CROP 67108864.0

static PyObject *run(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *rng, *passes, *boxes;
    long long width, height;
    double min_scale, max_scale, max_ratio, area_low, area_high;
    if (!PyArg_ParseTuple(args, "OLLdddOOdd", &rng, &width, &height, &min_scale, &max_scale,
                          &max_ratio, &passes, &boxes, &area_low, &area_high))
        return NULL;
    if (width < 1 || height < 1 || width > LARGEST_SIDE || height > LARGEST_SIDE) {
        PyErr_SetString(PyExc_ValueError, "the image's sides must be 1 to 2**31 - 1");
        return NULL;
    }
    Test test = {NULL, 0, area_low, area_high};
    double *box_values = NULL;
    if (boxes != Py_None) {
        PyObject *items = PySequence_Fast(boxes, "boxes must be a sequence of floats");
        if (items == NULL)
            return NULL;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
        if (n % 5 != 0) {
            Py_DECREF(items);
            PyErr_SetString(PyExc_ValueError, "boxes must be 5 floats a box");
            return NULL;
        }
        box_values = PyMem_New(double, n > 0 ? n : 1);
        if (box_values == NULL) {
            Py_DECREF(items);
            return PyErr_NoMemory();
        }
        for (Py_ssize_t k = 0; k < n; k++) {
            box_values[k] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(items, k));
            if (box_values[k] == -1.0 && PyErr_Occurred()) {
                Py_DECREF(items);
                PyMem_Free(box_values);
                return NULL;
            }
        }
        Py_DECREF(items);
        test.box = box_values;
        test.count = n / 5;
    }
    int no_boxes = test.box == NULL;
    Twister twister, before;

    PyObject *result = NULL, *state = NULL, *pass_list = NULL;
    Pass *pass = NULL;
    Py_ssize_t pass_count = 0, passes_run = 0, stopped_pass = -1;
    long long stopped_trial = 0;
    pass_list = PySequence_Fast(passes, "passes must be a sequence");
    if (pass_list == NULL)
        goto done;
    pass_count = PySequence_Fast_GET_SIZE(pass_list);
    pass = PyMem_New(Pass, pass_count > 0 ? pass_count : 1);
    if (pass == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t p = 0; p < pass_count; p++) {
        PyObject *item = PySequence_Fast_GET_ITEM(pass_list, p);
        if (!PyTuple_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "each pass must be a tuple "
                            "(max_trial, lowest, highest, bound)");
            goto done;
        }
        if (!PyArg_ParseTuple(item, "Lddd", &pass[p].max_trial, &pass[p].lowest,
                              &pass[p].highest, &pass[p].bound))
            goto done;
        pass[p].found = 0;
    }
    state = PyTuple_New(WORDS + 1);
    /* from read_state to write_state, nothing allocates an object the garbage collector
     * tracks: no collection, so no finalizer's Python code, runs in between */
    if (state == NULL || read_state(rng, &twister) < 0)
        goto done;
    double ratio_floor = 1 / max_ratio, spread = max_scale - min_scale;
    for (Py_ssize_t p = 0; p < pass_count && stopped_pass < 0; p++) {
        long long max_trial = pass[p].max_trial;
        double lowest = pass[p].lowest, highest = pass[p].highest, bound = pass[p].bound;
        int bounded = !isnan(bound);
        for (long long trial = 0; trial < max_trial; trial++) {
            /* where to rewind to, if this trial is Python's to draw: the index, and the
             * words too when the next four draws twist them (once in 156 trials) */
            int rewind_to = twister.next, twists = twister.next > WORDS - 4;
            if (twists)
                before = twister;
            double scale = min_scale + spread * next_double(&twister);
            double square = scale * scale;
            double floor_ = square > ratio_floor ? square : ratio_floor;
            double ceil_ = square != 0 ? 1 / square : INFINITY;
            if (ceil_ > max_ratio)
                ceil_ = max_ratio;
            double root = sqrt(floor_ + (ceil_ - floor_) * next_double(&twister));
            double crop_h_real = height * scale / root, crop_w_real = width * scale * root;
            int drawable = square != 0 && max_ratio != 0 && fabs(crop_h_real) < LARGEST_CROP
                           && fabs(crop_w_real) < LARGEST_CROP;
            int64_t crop_h = drawable ? (int64_t)crop_h_real : 0;
            int64_t crop_w = drawable ? (int64_t)crop_w_real : 0;
            int64_t room_y = height - crop_h, room_x = width - crop_w;
            if (!drawable || room_y < 1 || room_x < 1 || room_y > 4294967295LL
                    || room_x > 4294967295LL) {
                /* Python raises here, or draws what this cannot: its turn, from here */
                if (twists)
                    twister = before;
                else
                    twister.next = rewind_to;
                stopped_pass = p;
                stopped_trial = trial;
                break;
            }
            int64_t y = next_below(&twister, room_y), x = next_below(&twister, room_x);
            if (!no_boxes) {
                if (bounded) {
                    double area = (double)(crop_w * crop_h);
                    if (isinf(bound) || area <= 0 || nearness(test.area_low, area) < bound
                            || nearness(test.area_high, area) < bound)
                        continue;
                }
                if (!crop_passes(&test, x, y, crop_w, crop_h, lowest, highest))
                    continue;
            }
            pass[p].found = 1;
            pass[p].crop[0] = x;
            pass[p].crop[1] = y;
            pass[p].crop[2] = crop_w;
            pass[p].crop[3] = crop_h;
            break;
        }
        if (stopped_pass >= 0)
            break;
        passes_run = p + 1;
        if (no_boxes && pass[p].found)
            break; /* gluoncv keeps the first crop drawn */
    }
    if (write_state(rng, &twister, state) < 0)
        goto done;

    PyObject *found = PyList_New(passes_run);
    if (found == NULL)
        goto done;
    for (Py_ssize_t p = 0; p < passes_run; p++) {
        PyObject *crop = pass[p].found
            ? Py_BuildValue("(LLLL)", (long long)pass[p].crop[0], (long long)pass[p].crop[1],
                            (long long)pass[p].crop[2], (long long)pass[p].crop[3])
            : Py_NewRef(Py_None);
        if (crop == NULL) {
            Py_DECREF(found);
            goto done;
        }
        PyList_SET_ITEM(found, p, crop);
    }
    if (stopped_pass >= 0)
        result = Py_BuildValue("N(nL)", found, stopped_pass, stopped_trial);
    else
        result = Py_BuildValue("NO", found, Py_None);
done:
    PyMem_Free(pass);
    Py_XDECREF(pass_list);
    Py_XDECREF(state);
    PyMem_Free(box_values);
    return result;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS,
     "run(rng, width, height, min_scale, max_scale, max_aspect_ratio, passes, boxes, "
     "area_low, area_high) -> (found, stopped)\n\n"
     "The constrained crop's trials from the generator's state; see "
     "gluonbatch.transforms.crop_trials."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_trials",
    "The constrained crop's trial loop, compiled (gluonbatch.transforms.crop_trials).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__trials(void)
{
    PyObject *random_module = PyImport_ImportModule("_random");
    if (random_module == NULL)
        return NULL;
    PyObject *base = PyObject_GetAttrString(random_module, "Random");
    Py_DECREF(random_module);
    if (base == NULL)
        return NULL;
    base_getstate = PyObject_GetAttrString(base, "getstate");
    base_setstate = PyObject_GetAttrString(base, "setstate");
    Py_DECREF(base);
    if (base_getstate == NULL || base_setstate == NULL)
        return NULL;
    return PyModule_Create(&module);
}

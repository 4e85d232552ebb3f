/*
 * odradek.wire._framing: the produce-time record framing walk in C.
 *
 * The same checks as odradek.wire.records.check_framing_py, which stays the fallback when this
 * extension is not built: Kafka's LogValidator walking DefaultRecord.readFrom over every record
 * of a produced batch, building nothing. tests/wire/test_framing_impls.py runs every case
 * against both walks.
 *
 * A record inside a RecordBatch v2 (see records.py for the full layout):
 *
 *     length            varint    bytes of the record after this field (>= 6)
 *     attributes        int8
 *     timestamp_delta   varlong   any value, skipped
 *     offset_delta      varint    must equal the record's index in the batch
 *     key_length        varint    -1 (null) or >= 0, then the key
 *     value_length      varint    -1 (null) or >= 0, then the value
 *     header_count      varint    >= 0, then per header:
 *       key_length      varint    >= 0, then the key
 *       value_length    varint    -1 (null) or >= 0, then the value
 *
 * varint / varlong: zigzag base-128, at most 5 / 10 bytes; bits past 32 of a 5-byte varint are
 * dropped as Java does. Every read is checked against the end of the record (or of the batch
 * for the length field) before it happens; nothing is allocated on the way; lengths are added
 * to positions only after they have been checked to fit.
 *
 * Errors raise odradek.wire.batch.InvalidRecordError (Kafka's InvalidRecordException,
 * INVALID_RECORD) with the messages of the Python walk.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* The smallest record body: attributes, timestamp delta, offset delta, key length, value length
   and header count, one byte each. */
#define MIN_RECORD_BODY 6

static PyObject *InvalidRecordError; /* odradek.wire.batch.InvalidRecordError */

/* Result of a varint read: 0 ok, 1 truncated (ran into `end`), 2 too long. */
enum { VARINT_OK = 0, VARINT_TRUNCATED = 1, VARINT_TOO_LONG = 2 };

/* Zigzag int32 at *p, not reading at or past end; advances *p. */
static inline int
read_varint(const uint8_t *buf, Py_ssize_t *p, Py_ssize_t end, int32_t *out)
{
    Py_ssize_t pos = *p;
    uint32_t raw = 0;
    for (int i = 0; i < 5; i++) {
        if (pos >= end) {
            return VARINT_TRUNCATED;
        }
        uint8_t b = buf[pos++];
        raw |= (uint32_t)(b & 0x7F) << (7 * i); /* the 5th byte's high bits fall off, as Java */
        if (!(b & 0x80)) {
            *out = (int32_t)((raw >> 1) ^ (0U - (raw & 1U)));
            *p = pos;
            return VARINT_OK;
        }
    }
    return VARINT_TOO_LONG;
}

/* Skip a varlong at *p, not reading at or past end; advances *p. */
static inline int
skip_varlong(const uint8_t *buf, Py_ssize_t *p, Py_ssize_t end)
{
    Py_ssize_t pos = *p;
    for (int i = 0; i < 10; i++) {
        if (pos >= end) {
            return VARINT_TRUNCATED;
        }
        if (!(buf[pos++] & 0x80)) {
            *p = pos;
            return VARINT_OK;
        }
    }
    return VARINT_TOO_LONG;
}

static void
varint_error(int status, int max_bytes, Py_ssize_t index)
{
    if (status == VARINT_TRUNCATED) {
        PyErr_Format(InvalidRecordError, "record %zd: truncated varint", index);
    }
    else {
        PyErr_Format(InvalidRecordError, "record %zd: varint longer than %d bytes", index,
                     max_bytes);
    }
}

/* Headers of record `index` from p (at its header count); returns the position after them, or
   -1 with the error set. */
static Py_ssize_t
check_headers(const uint8_t *buf, Py_ssize_t p, Py_ssize_t rec_end, Py_ssize_t index)
{
    int32_t count, n;
    int st;
    if ((st = read_varint(buf, &p, rec_end, &count)) != VARINT_OK) {
        varint_error(st, 5, index);
        return -1;
    }
    /* each header takes at least two bytes (key length 0, value length -1) */
    if (count < 0 || 2 * (Py_ssize_t)count > rec_end - p) {
        PyErr_Format(InvalidRecordError, "record %zd: invalid header count %d", index, (int)count);
        return -1;
    }
    for (int32_t i = 0; i < count; i++) {
        if ((st = read_varint(buf, &p, rec_end, &n)) != VARINT_OK) {
            varint_error(st, 5, index);
            return -1;
        }
        if (n < 0 || (Py_ssize_t)n > rec_end - p) {
            PyErr_Format(InvalidRecordError, "record %zd: invalid header key length %d", index,
                         (int)n);
            return -1;
        }
        p += n;
        if ((st = read_varint(buf, &p, rec_end, &n)) != VARINT_OK) {
            varint_error(st, 5, index);
            return -1;
        }
        if (n < -1 || (Py_ssize_t)n > rec_end - p) {
            PyErr_Format(InvalidRecordError, "record %zd: invalid header value length %d", index,
                         (int)n);
            return -1;
        }
        if (n > 0) {
            p += n;
        }
    }
    return p;
}

/* The walk over data[pos:end]; 0 on success, -1 with the error set. */
static int
walk(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count)
{
    int32_t length, delta, n;
    int st;
    for (Py_ssize_t index = 0; index < count; index++) {
        if (pos >= end) {
            PyErr_SetString(InvalidRecordError, "record data ends before the declared records");
            return -1;
        }
        Py_ssize_t p = pos;
        if ((st = read_varint(buf, &p, end, &length)) != VARINT_OK) {
            varint_error(st, 5, index);
            return -1;
        }
        if (length < MIN_RECORD_BODY || (Py_ssize_t)length > end - p) {
            PyErr_Format(InvalidRecordError,
                         "record %zd declares %d bytes with %zd left in the batch", index,
                         (int)length, end - p);
            return -1;
        }
        Py_ssize_t rec_end = p + length;
        p += 1; /* attributes: fits, the body has at least 6 bytes */
        if ((st = skip_varlong(buf, &p, rec_end)) != VARINT_OK) {
            varint_error(st, 10, index);
            return -1;
        }
        if ((st = read_varint(buf, &p, rec_end, &delta)) != VARINT_OK) {
            varint_error(st, 5, index);
            return -1;
        }
        if ((Py_ssize_t)delta != index) {
            PyErr_Format(InvalidRecordError, "record %zd has offset delta %d", index, (int)delta);
            return -1;
        }
        /* key, then value: -1 (null) or a length that fits in the record */
        for (int field = 0; field < 2; field++) {
            if ((st = read_varint(buf, &p, rec_end, &n)) != VARINT_OK) {
                varint_error(st, 5, index);
                return -1;
            }
            if (n < -1) {
                PyErr_Format(InvalidRecordError, "record %zd: invalid %s length %d", index,
                             field ? "value" : "key", (int)n);
                return -1;
            }
            if (n > 0) {
                if ((Py_ssize_t)n >= rec_end - p) { /* the header count must follow */
                    PyErr_Format(InvalidRecordError,
                                 "record %zd: key or value overruns the record", index);
                    return -1;
                }
                p += n;
            }
        }
        if (p >= rec_end) {
            PyErr_Format(InvalidRecordError, "record %zd: key or value overruns the record",
                         index);
            return -1;
        }
        if (buf[p]) {
            if ((p = check_headers(buf, p, rec_end, index)) < 0) {
                return -1;
            }
        }
        else {
            p += 1;
        }
        if (p != rec_end) {
            PyErr_Format(InvalidRecordError, "record %zd declares %d bytes but holds %zd", index,
                         (int)length, (Py_ssize_t)length + p - rec_end);
            return -1;
        }
        pos = rec_end;
    }
    if (pos != end) {
        PyErr_Format(InvalidRecordError, "%zd bytes left after the %zd declared records",
                     end - pos, count);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(check_framing_doc,
             "check_framing(data, pos, end, count)\n--\n\n"
             "Walk `count` records in data[pos:end] as Kafka's DefaultRecord.readFrom, building\n"
             "nothing; raises InvalidRecordError. The C twin of records.check_framing_py.");

static PyObject *
check_framing(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "check_framing() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (end == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[3]);
    if (count == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (pos < 0) {
        PyErr_SetString(PyExc_ValueError, "check_framing: negative position");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    int rc;
    /* every record takes at least 7 bytes; rejecting early avoids a long loop on garbage */
    if (count < 0 || end < pos || count > (end - pos) / (MIN_RECORD_BODY + 1)) {
        PyErr_Format(InvalidRecordError, "record count %zd does not fit %zd bytes", count,
                     end - pos);
        rc = -1;
    }
    else if (end > view.len) {
        /* the Python walk reads up to `end`, fails past the buffer */
        PyErr_SetString(InvalidRecordError, "record data ends before the declared records");
        rc = -1;
    }
    else {
        rc = walk((const uint8_t *)view.buf, pos, end, count);
    }
    PyBuffer_Release(&view);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef framing_methods[] = {
    {"check_framing", (PyCFunction)(void (*)(void))check_framing, METH_FASTCALL,
     check_framing_doc},
    {NULL, NULL, 0, NULL},
};

static int
framing_exec(PyObject *module)
{
    if (InvalidRecordError != NULL) { /* executed again (a subinterpreter): keep the first */
        return PyModule_AddObjectRef(module, "InvalidRecordError", InvalidRecordError);
    }
    PyObject *batch = PyImport_ImportModule("odradek.wire.batch");
    if (batch == NULL) {
        return -1;
    }
    InvalidRecordError = PyObject_GetAttrString(batch, "InvalidRecordError");
    Py_DECREF(batch);
    if (InvalidRecordError == NULL) {
        return -1;
    }
    if (PyModule_AddObjectRef(module, "InvalidRecordError", InvalidRecordError) < 0) {
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot framing_slots[] = {
    {Py_mod_exec, framing_exec},
    {0, NULL},
};

static struct PyModuleDef framing_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "odradek.wire._framing",
    .m_doc = "Produce-time record framing walk in C (see odradek.wire.records.check_framing).",
    .m_size = 0,
    .m_methods = framing_methods,
    .m_slots = framing_slots,
};

PyMODINIT_FUNC
PyInit__framing(void)
{
    return PyModuleDef_Init(&framing_module);
}

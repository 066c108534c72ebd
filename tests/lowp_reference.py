"""The products of int8 and bfloat16 prepared nets, as the documented numeric model states them
(include/cells/lowp.h, the Serving guide), written here in NumPy from that statement alone.

Each function takes a [M, K] of float32 values (a row block of x, h or an intermediate) and
the float32 weights w [K, n] as given to prepare, and returns the float32 result the kernels
must produce, element for element, as float64. The family references (gru_reference etc.)
take them as their `product`.

int8: per column j of w, s_w = fl32(max|w| / 127), q = clamp(rint(fl32(w / s_w)), -127, 127)
(or q and s_w as given: int8_product_quantized);
per row i of a, lo = min(0, min a), hi = max(0, max a), s_a = fl32(fl32(hi - lo) / 127),
zp = clamp(rint(fl32(-lo / s_a)), 0, 127), qa = clamp(rint(fl32(a / s_a)) + zp, 0, 127)
(7 bits);
acc = Σ qa·q - zp·Σ q exactly; the result is fl32(fl32(s_a·s_w)·fl32(acc)).

bfloat16: a and w rounded to bfloat16 to nearest even (below FLT_MIN: a zero of its sign);
each element one chain over the pairs of k in increasing order, the odd k of a pair first:
s = ftz(fl32(a·w + s)), ftz flushing a result below FLT_MIN (at float32's precision, the
exponent unbounded) to zero.
"""
import numpy as np

F32 = np.float32
FLT_MIN = np.finfo(np.float32).tiny
A_LEVELS = 127  # the activations' top level: 7 bits


def _f32(a):
    return np.asarray(a, dtype=np.float32)


def int8_weights(w):
    """(q [K, n] int64, s_w [n] float32) of float32 weights w [K, n]."""
    w = _f32(w)
    s = _f32(np.abs(w).max(axis=0, initial=0) / F32(127))
    s = np.where(s > 0, s, F32(1))
    q = np.clip(np.rint(_f32(w / s)), -127, 127).astype(np.int64)
    return q, s


def int8_rows(a):
    """(qa [M, K] int64, s_a [M] float32, zp [M] int64) of float32 rows a [M, K]."""
    a = _f32(a)
    lo = np.minimum(F32(0), a.min(axis=1, initial=0))
    hi = np.maximum(F32(0), a.max(axis=1, initial=0))
    s = _f32(_f32(hi - lo) / F32(A_LEVELS))
    s = np.where(s > 0, s, F32(1))
    zp = np.clip(np.rint(_f32(-lo / s)), 0, A_LEVELS)
    qa = np.clip(np.rint(_f32(a / s[:, None])) + zp[:, None], 0, A_LEVELS)
    return qa.astype(np.int64), s, zp.astype(np.int64)


def int8_product(a, w):
    """The int8 product of float32 rows a [M, K] and weights w [K, n] (as float64)."""
    return int8_product_quantized(a, *int8_weights(w))


def int8_product_quantized(a, q, s_w):
    """The int8 product of float32 rows a [M, K] and weights given already quantized: q [K, n]
    (integers in [-127, 127]) with their column scales s_w [n] (float32), as float64: what a
    net packed from them (cells.onnx.dynamic_quantize_lstm's) computes; int8_product is this
    with the q and s_w of int8_weights."""
    q = np.asarray(q, np.int64)
    s_w = _f32(s_w)
    qa, s_a, zp = int8_rows(a)
    acc = qa @ q - zp[:, None] * q.sum(axis=0)[None, :]
    scale = _f32(s_a[:, None] * s_w[None, :])
    return _f32(scale * _f32(acc)).astype(np.float64)


def bf16(a):
    """float32 values rounded to bfloat16, to nearest even (a value below FLT_MIN in magnitude
    becomes a zero of its sign), as float32."""
    u = _f32(a).view(np.uint32).astype(np.uint64)
    tiny = (u & 0x7F800000) == 0
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16
    out = np.where(tiny, u & 0x80000000, rounded).astype(np.uint32).view(np.float32)
    return out


def _ftz_round(v):
    """float64 values v rounded to float32 (each v = a·w + s of a bfloat16 product and a
    float32, for which float64 holds the exact sum or one whose rounding to float32 is the
    same), a result below FLT_MIN at float32's precision flushed to a zero of its sign."""
    scaled = _f32(v * 2.0 ** 64)   # normal in float32: rounded with the exponent unbounded
    flush = np.abs(scaled) < F32(FLT_MIN * 2.0 ** 64)
    return np.where(flush, np.copysign(F32(0), v), _f32(v))


def bf16_product(a, w):
    """The bfloat16 product of float32 rows a [M, K] and weights w [K, n] (as float64)."""
    a, w = bf16(a).astype(np.float64), bf16(w).astype(np.float64)
    M, K = a.shape
    s = np.zeros((M, w.shape[1]), np.float32)
    for t in range(0, K, 2):
        for k in (t + 1, t):        # the odd k of the pair first
            if k < K:
                s = _ftz_round(np.outer(a[:, k], w[k]) + s)
    return s.astype(np.float64)


PRODUCTS = {"int8": int8_product, "bfloat16": bf16_product}


def one_flip(a, w, kind):
    """The most the product of a [M, K] and w [K, n] changes, [M, n], when one element of a
    row of `a` that lies within a few float32 ulps of a rounding boundary converts to the
    level on its other side (0 for the rows with no such element): the allowance for a product
    whose rows (an intermediate the kernel computes in float32) the reference knows only to
    float32 precision."""
    a, w = _f32(a), _f32(w)
    column = np.abs(w).max(axis=0)[None, :].astype(np.float64)
    if kind == "int8":
        _, s_a, _ = int8_rows(a)
        levels = a / s_a[:, None].astype(np.float64)
        # a few ulps of the row (or of the max or min that sets s_a) move levels by <= 3e-5
        near = np.abs(levels - np.floor(levels) - 0.5) < 1e-4
        return near.any(axis=1)[:, None] * s_a[:, None].astype(np.float64) * column * 1.01
    _, e = np.frexp(np.abs(a).astype(np.float64))
    levels = np.abs(a) / np.ldexp(1.0, e - 8)              # in bfloat16 ulps of each element
    near = (np.abs(levels - np.floor(levels) - 0.5) < 2.0 ** -14) & (a != 0)
    amax = np.abs(a).max(axis=1, initial=0)[:, None].astype(np.float64)
    return near.any(axis=1)[:, None] * amax * 2.0 ** -7 * column * 1.01

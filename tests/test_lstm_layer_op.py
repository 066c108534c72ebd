"""cells.lstmLayer and cells.lstmLayer_bp (libnd4j's lstmLayer op) against an independent float64
reference written here from the op's description (shared/notes/libnd4j-lstmLayer.md: its
activation table, cell math and step sets), central differences of that reference, libnd4j's
own expected values (its tests lstmLayer_1 ... lstmLayer_12), and torch.nn.LSTM; its quirks,
scalar gradients, bad input and empty dimensions."""
import numpy as np
import pytest

import cells

# ---------------------------------------------------------------------------------------------
# The reference: float64, one loop step at a time over all rows, each row at its own time index
# ---------------------------------------------------------------------------------------------

# libnd4j's hard sigmoid slope is the float literal 0.2f, also in double.
F32_POINT_TWO = float(np.float32(0.2))

# code -> (act(z), act'(z)) with alpha a and beta b (the note's table; derivatives on z).
REF_ACTS = {
    0: (lambda z, a, b: np.tanh(z), lambda z, a, b: 1 - np.tanh(z) ** 2),
    1: (lambda z, a, b: np.where(z < 0, 0.0, z), lambda z, a, b: np.where(z > 0, 1.0, 0.0)),
    2: (lambda z, a, b: 1 / (1 + np.exp(-z)),
        lambda z, a, b: np.exp(-z) / (1 + np.exp(-z)) ** 2),
    3: (lambda z, a, b: a * z + b, lambda z, a, b: np.full_like(z, a)),
    4: (lambda z, a, b: np.where(z < 0, a * z, z), lambda z, a, b: np.where(z >= 0, 1.0, a)),
    5: (lambda z, a, b: np.where(z > a, z, 0.0), lambda z, a, b: np.where(z > a, 1.0, 0.0)),
    6: (lambda z, a, b: a * np.tanh(b * z), lambda z, a, b: a * b * (1 - np.tanh(b * z) ** 2)),
    7: (lambda z, a, b: np.minimum(1, np.maximum(0, F32_POINT_TWO * z + 0.5)),
        lambda z, a, b: np.where((z < -2.5) | (z > 2.5), 0.0, F32_POINT_TWO)),
    8: (lambda z, a, b: np.where(z >= 0, z, a * np.expm1(np.minimum(z, 0))),
        lambda z, a, b: np.where(z >= 0, 1.0, a * np.exp(np.minimum(z, 0)))),
    9: (lambda z, a, b: z / (1 + np.abs(z)), lambda z, a, b: 1 / (1 + np.abs(z)) ** 2),
    10: (lambda z, a, b: np.log1p(np.exp(z)), lambda z, a, b: 1 / (1 + np.exp(-z))),
}
DEFAULT_ACTS = ((2, 0.0, 0.0), (0, 0.0, 0.0), (0, 0.0, 0.0))


def ref_act(act, z):
    code, alpha, beta = act
    return REF_ACTS[code][0](z, alpha, beta)


def ref_cell(x, h, c, Wx, Wr, b, Wp, acts, clip):
    """One step of all rows (note §4): the peepholes i, f see the old c, o the new clipped c."""
    gate, cell, out = acts
    n = Wr.shape[0]
    z = x @ Wx + h @ Wr + (0 if b is None else b)
    zi, zf, zg, zo = (z[:, k * n:(k + 1) * n] for k in range(4))
    wpi, wpf, wpo = (np.zeros(n),) * 3 if Wp is None else (Wp[:n], Wp[n:2 * n], Wp[2 * n:])
    i, f = ref_act(gate, zi + wpi * c), ref_act(gate, zf + wpf * c)
    c = f * c + i * ref_act(cell, zg)
    if clip > 0:
        c = np.clip(c, -clip, clip)
    return ref_act(gate, zo + wpo * c) * ref_act(out, c), c


def ref_direction(x, Wx, Wr, b, hI, cI, Wp, lengths, steps, acts, clip):
    """One direction over time-major x [sL, bS, nIn]; `steps`: "prefix" (t = 0 ... L-1),
    "reversed prefix" (t = L-1 ... 0) or "suffix" (t = sL-1 ... sL-L), L = the row's length
    (sL for every row without lengths). Returns h [sL, bS, nOut], hL, cL; a row of length 0
    ends with zero states."""
    sL, bS, _ = x.shape
    n = Wr.shape[0]
    L = np.full(bS, sL) if lengths is None else lengths
    h = np.zeros((bS, n)) if hI is None else hI.copy()
    c = np.zeros((bS, n)) if cI is None else cI.copy()
    H = np.zeros((sL, bS, n))
    rows = np.arange(bS)
    for k in range(sL):
        active = k < L
        tau = {"prefix": np.full(bS, k), "reversed prefix": L - 1 - k,
               "suffix": np.full(bS, sL - 1 - k)}[steps]
        tau = np.where(active, tau, 0)
        hn, cn = ref_cell(x[tau, rows], h, c, Wx, Wr, b, Wp, acts, clip)
        h = np.where(active[:, None], hn, h)
        c = np.where(active[:, None], cn, c)
        H[tau[active], rows[active]] = hn[active]
    if lengths is not None:
        h[L == 0] = 0
        c[L == 0] = 0
    return H, h, c


def ref_layer(x, Wx, Wr, b, seqLen, hI, cI, Wp, df, dm, acts, clip):
    """The op (note §5) from ref_direction: (h, hL, cL) in the op's layouts. alpha, beta and
    the clip are float32 numbers (libnd4j's T-args)."""
    f32 = lambda v: float(np.float32(v))  # noqa: E731
    acts = tuple((code, f32(alpha), f32(beta)) for code, alpha, beta in acts)
    clip = f32(clip)
    lengths = None if seqLen is None else np.trunc(seqLen).astype(int)
    xt = {0: x, 1: x.transpose(1, 0, 2), 2: x.transpose(2, 0, 1), 3: x}[df]
    pick = (lambda a, d: a) if dm < 2 else (lambda a, d: None if a is None else a[d])
    directions = {0: ["prefix"], 1: ["suffix" if lengths is not None else "reversed prefix"]}
    runs = [ref_direction(xt, pick(Wx, d), pick(Wr, d), pick(b, d), pick(hI, d), pick(cI, d),
                          pick(Wp, d), lengths, steps, acts, clip)
            for d, steps in enumerate(directions.get(dm, ["prefix", "reversed prefix"]))]
    hs = [r[0] for r in runs]
    if dm < 2:
        h = hs[0]
    elif dm == 2:
        h = hs[0] + hs[1]
    elif dm == 3:
        h = np.concatenate(hs, axis=2)
    else:
        h = np.stack(hs, axis=1)
    if dm != 4:
        h = {0: h, 1: h.transpose(1, 0, 2), 2: h.transpose(1, 2, 0)}[df]
    hL, cL = ([r[k] for r in runs] for k in (1, 2))
    if dm >= 2:
        return h, np.stack(hL), np.stack(cL)
    return h, hL[0], cL[0]


# ---------------------------------------------------------------------------------------------
# Problems
# ---------------------------------------------------------------------------------------------

INPUTS = ("x", "Wx", "Wr", "b", "hI", "cI", "Wp")
GRADS = ("dLdx", "dLdWx", "dLdWr", "dLdb", "dLdhI", "dLdcI", "dLdWp")
# Every (dataFormat, directionMode) libnd4j defines.
FORMATS = [(df, dm) for df in (0, 1, 2) for dm in (0, 1, 2, 3)] + [(0, 4), (3, 4)]
# alpha, beta of the codes that have them (thresholded relu's alpha among the pre-activations).
ALPHA_BETA = {3: (0.7, 0.2), 4: (0.1, 0.0), 5: (0.3, 0.0), 6: (1.5, 0.7), 8: (0.9, 0.0)}


def x_shape(df, sL, bS, nIn):
    return {0: (sL, bS, nIn), 1: (bS, sL, nIn), 2: (bS, nIn, sL), 3: (sL, bS, nIn)}[df]


def make_problem(seed, df, dm, sL=4, bS=3, nIn=2, nOut=2, seq_len=None, peepholes=True,
                 optional=True):
    rng = np.random.default_rng(seed)
    lead = () if dm < 2 else (2,)
    p = {"x": rng.normal(0, 1, x_shape(df, sL, bS, nIn)),
         "Wx": rng.normal(0, 0.6, lead + (nIn, 4 * nOut)),
         "Wr": rng.normal(0, 0.6, lead + (nOut, 4 * nOut)),
         "b": rng.normal(0, 0.4, lead + (4 * nOut,)) if optional else None,
         "seqLen": None if seq_len is None else np.array(seq_len),
         "hI": rng.normal(0, 0.8, lead + (bS, nOut)) if optional else None,
         "cI": rng.normal(0, 0.8, lead + (bS, nOut)) if optional else None,
         "Wp": rng.normal(0, 0.5, lead + (3 * nOut,)) if peepholes else None}
    return p


def act_keywords(acts):
    kw = {}
    for kind, (code, alpha, beta) in zip(("gate", "cell", "out"), acts):
        kw.update({f"{kind}Act": code, f"{kind}Alpha": alpha, f"{kind}Beta": beta})
    return kw


def acts_for(code):
    """Code `code` at the gates, the next ones at the candidate and the output, so that every
    code is in every place over the 11 codes."""
    return tuple((k, *ALPHA_BETA.get(k, (0.0, 0.0))) for k in (code, (code + 4) % 11,
                                                                (code + 8) % 11))


def output_weights(rng, p, df, dm):
    """Random gradients arriving at h, hL, cL, in the op's shapes."""
    h, hL, cL = ref_layer(*(p[k] for k in ("x", "Wx", "Wr", "b", "seqLen", "hI", "cI", "Wp")),
                          df, dm, DEFAULT_ACTS, 0.0)
    return [rng.normal(0, 1, a.shape) for a in (h, hL, cL)]


def ref_loss(p, df, dm, acts, clip, w):
    out = ref_layer(*(p[k] for k in ("x", "Wx", "Wr", "b", "seqLen", "hI", "cI", "Wp")),
                    df, dm, acts, clip)
    return sum(float(np.sum(wk * o)) for wk, o in zip(w, out))


def cast(p, dtype):
    return {k: (None if v is None else v if k == "seqLen" else v.astype(dtype))
            for k, v in p.items()}


def run_op(p, df, dm, acts, clip, **kw):
    return cells.lstmLayer(*(p[k] for k in ("x", "Wx", "Wr", "b", "seqLen", "hI", "cI", "Wp")),
                           dataFormat=df, directionMode=dm, cellClip=clip, **act_keywords(acts),
                           **kw)


def run_bp(p, df, dm, acts, clip, dLdh=None, dLdhL=None, dLdcL=None, **kw):
    return cells.lstmLayer_bp(*(p[k] for k in ("x", "Wx", "Wr", "b", "seqLen", "hI", "cI",
                                               "Wp")),
                              dLdh, dLdhL, dLdcL, dataFormat=df, directionMode=dm,
                              cellClip=clip, retFullSeq=dLdh is not None,
                              retLastH=dLdhL is not None, retLastC=dLdcL is not None,
                              **act_keywords(acts), **kw)


ALL = dict(retFullSeq=True, retLastH=True, retLastC=True)

# ---------------------------------------------------------------------------------------------
# Every activation code in every place, every data format and direction mode, with peepholes,
# clipping and seqLen: the forward against the reference, the gradients against its central
# differences
# ---------------------------------------------------------------------------------------------

CASES = [(code, *FORMATS[(3 * k + code) % len(FORMATS)], seq)
         for k, seq in enumerate((None, [4, 0, 2.7])) for code in range(11)]


@pytest.mark.parametrize("code,df,dm,seq_len", CASES)
def test_op_forward_and_gradients_vs_reference(code, df, dm, seq_len):
    acts, clip = acts_for(code), 0.9
    p = make_problem(100 + code, df, dm, seq_len=seq_len)
    rng = np.random.default_rng(200 + code)
    w = output_weights(rng, p, df, dm)
    ref = ref_layer(*(p[k] for k in ("x", "Wx", "Wr", "b", "seqLen", "hI", "cI", "Wp")), df, dm,
                    acts, clip)
    got = run_op(p, df, dm, acts, clip, **ALL)
    for name, a, r in zip(("h", "hL", "cL"), got, ref):
        assert a.shape == r.shape and a.dtype == np.float64 and a.flags.c_contiguous, name
        np.testing.assert_allclose(a, r, rtol=0, atol=1e-12, err_msg=name)

    grads = run_bp(p, df, dm, acts, clip, *w)
    assert isinstance(grads, cells.LstmLayerGrads)
    eps = 1e-6
    for name, gname in zip(INPUTS, GRADS):
        g = getattr(grads, gname)
        assert g.shape == p[name].shape and g.flags.c_contiguous, gname
        v = rng.normal(0, 1, p[name].shape)
        plus, minus = dict(p), dict(p)
        plus[name], minus[name] = p[name] + eps * v, p[name] - eps * v
        fd = (ref_loss(plus, df, dm, acts, clip, w) - ref_loss(minus, df, dm, acts, clip, w))
        fd /= 2 * eps
        assert abs(np.sum(g * v) - fd) <= 1e-7 * max(1.0, abs(fd)), (gname, np.sum(g * v), fd)


@pytest.mark.parametrize("code,df,dm", [(code, *FORMATS[(5 * code) % len(FORMATS)])
                                        for code in range(0, 11, 2)])
def test_op_float32_vs_reference(code, df, dm):
    """float32 in, float32 out, within float32 rounding of the float64 reference (and the
    float64 op's gradients)."""
    acts, clip = acts_for(code), 0.9
    p = make_problem(300 + code, df, dm, seq_len=[4, 1, 3])
    w = output_weights(np.random.default_rng(400 + code), p, df, dm)
    ref = ref_layer(*(p[k] for k in ("x", "Wx", "Wr", "b", "seqLen", "hI", "cI", "Wp")), df, dm,
                    acts, clip)
    p32 = cast(p, np.float32)
    for name, a, r in zip(("h", "hL", "cL"), run_op(p32, df, dm, acts, clip, **ALL), ref):
        assert a.dtype == np.float32, name
        np.testing.assert_allclose(a, r, rtol=0, atol=2e-6, err_msg=name)
    g64 = run_bp(p, df, dm, acts, clip, *w)
    g32 = run_bp(p32, df, dm, acts, clip, *(a.astype(np.float32) for a in w))
    for name in GRADS:
        a, r = getattr(g32, name), getattr(g64, name)
        assert a.dtype == np.float32, name
        np.testing.assert_allclose(a, r, rtol=0, atol=2e-5 * max(1.0, np.abs(r).max()),
                                   err_msg=name)


# ---------------------------------------------------------------------------------------------
# libnd4j's own expected values (DeclarableOpsTests13.cpp, lstmLayer_1 ... lstmLayer_12): x =
# linspace(0.5, 0.5) in x's layout, constant weights (the backward direction's negated), every
# unit of a row alike; the values below are one unit's, per (time, row) or per row
# ---------------------------------------------------------------------------------------------

def libnd4j_problem(df, dm, sL, bS, nIn, peepholes=False, seq_len=None, dtype=np.float32):
    """The inputs of libnd4j's tests: Wx 0.003, Wr 0.006, b 0.5, hI 1, cI 2, Wp -0.05, the
    bidirectional layer's second direction with each sign flipped."""
    nOut = 3
    shape = x_shape(df, sL, bS, nIn)
    x = (0.5 + 0.5 * np.arange(np.prod(shape))).reshape(shape)
    signs = [1.0] if dm < 2 else [1.0, -1.0]

    def const(value, shape):
        a = np.stack([s * np.full(shape, value) for s in signs])
        return a if dm >= 2 else a[0]

    p = {"x": x, "Wx": const(0.003, (nIn, 4 * nOut)), "Wr": const(0.006, (nOut, 4 * nOut)),
         "b": const(0.5, (4 * nOut,)), "hI": const(1.0, (bS, nOut)),
         "cI": const(2.0, (bS, nOut)),
         "Wp": const(-0.05, (3 * nOut,)) if peepholes else None,
         "seqLen": None if seq_len is None else np.array(seq_len, np.float32)}
    return cast(p, dtype)


def units(values, nOut=3):
    """Every unit of a row alike: the values repeated along a last axis of nOut."""
    return np.repeat(np.asarray(values, np.float64)[..., None], nOut, axis=-1)


# test: (dataFormat, directionMode, sL, bS, nIn, peepholes, cellClip, seqLen, h per (time,
# row) (dataFormat 1: per (row, time); directionMode 3: (forward, backward) pairs), hL per row
# (None: not checked), cL per row)
LIBND4J = {
    "lstmLayer_1": (0, 0, 5, 3, 3, False, 0.0, None,
                    [[0.57574, 0.58006, 0.58434], [0.55114, 0.55732, 0.56338],
                     [0.53763, 0.54534, 0.55287], [0.53626, 0.54487, 0.55327],
                     [0.54484, 0.55379, 0.5625]],
                    None, [1.1589154, 1.1892855, 1.219861]),
    "lstmLayer_2": (1, 0, 5, 3, 3, False, 0.0, None,
                    [[0.575735, 0.541562, 0.514003, 0.495597, 0.485999],
                     [0.596965, 0.571978, 0.552888, 0.540606, 0.534764],
                     [0.61725, 0.599828, 0.587627, 0.580408, 0.577735]],
                    None, [0.996965, 1.146756, 1.301922]),
    "lstmLayer_3": (0, 1, 5, 2, 4, False, 0.0, None,
                    [[0.493883, 0.510990], [0.534701, 0.549139], [0.571900, 0.583561],
                     [0.605106, 0.614114], [0.635354, 0.642045]],
                    [0.493883, 0.510990], [1.061274, 1.115888]),
    "lstmLayer_4": (0, 3, 5, 2, 4, False, 0.0, None,
                    [[(0.577661, -0.107642), (0.585289, -0.106937)],
                     [(0.556517, -0.111647), (0.567274, -0.110214)],
                     [(0.547395, -0.123305), (0.560640, -0.120862)],
                     [(0.550714, -0.156223), (0.565308, -0.152313)],
                     [(0.563741, -0.234128), (0.578676, -0.228917)]],
                    [[0.563741, 0.578676], [-0.107642, -0.106937]],
                    [[1.217757, 1.272398], [-0.295768, -0.298453]]),
    "lstmLayer_5": (1, 3, 5, 2, 4, False, 0.0, None,
                    [[(0.577661, -0.107659), (0.548099, -0.113406), (0.526881, -0.12883),
                      (0.515882, -0.16868), (0.51409, -0.255185)],
                     [(0.614599, -0.102739), (0.599572, -0.105802), (0.591089, -0.116681),
                      (0.588694, -0.149201), (0.591492, -0.228917)]],
                    [[0.51409, 0.591492], [-0.107659, -0.102739]],
                    [[1.07293, 1.346609], [-0.295811, -0.305394]]),
    "lstmLayer_6": (0, 2, 5, 2, 4, False, 0.0, None,
                    [[0.470019, 0.478352], [0.444871, 0.457060], [0.424090, 0.439778],
                     [0.394491, 0.412995], [0.329613, 0.349760]],
                    [[0.563741, 0.578676], [-0.107642, -0.106937]],
                    [[1.217757, 1.272398], [-0.295768, -0.298453]]),
    "lstmLayer_7": (0, 0, 5, 2, 4, True, 0.0, None,
                    [[0.55533, 0.562925], [0.531795, 0.542556], [0.521466, 0.534638],
                     [0.524805, 0.539187], [0.538309, 0.552923]],
                    [0.538309, 0.552923], [1.147089, 1.197228]),
    "lstmLayer_8": (0, 1, 5, 2, 4, True, 1.0, None,
                    [[0.436221, 0.450573], [0.463602, 0.474674], [0.484039, 0.490679],
                     [0.494871, 0.499028], [0.504649, 0.508719]],
                    [0.436221, 0.450573], [0.879804, 0.914666]),
    "lstmLayer_9": (0, 3, 5, 2, 4, True, 0.0, None,
                    [[(0.55533, -0.104502), (0.562925, -0.103843)],
                     [(0.531795, -0.107456), (0.542556, -0.106139)],
                     [(0.521466, -0.11681), (0.534638, -0.11458)],
                     [(0.524805, -0.145177), (0.539187, -0.14157)],
                     [(0.538309, -0.218056), (0.552923, -0.213068)]],
                    [[0.538309, 0.552923], [-0.104502, -0.103843]],
                    [[1.147089, 1.197228], [-0.289425, -0.292174]]),
    "lstmLayer_10": (0, 0, 6, 5, 4, True, 0.0, [0, 1, 2, 3, 5],
                     [[0, 0.562925, 0.570404, 0.57777, 0.585023],
                      [0, 0, 0.576568, 0.586163, 0.595462],
                      [0, 0, 0, 0.611224, 0.621298],
                      [0, 0, 0, 0, 0.655858],
                      [0, 0, 0, 0, 0.692315],
                      [0, 0, 0, 0, 0]],
                     [0, 0.562925, 0.576568, 0.611224, 0.692315],
                     [0, 1.534275, 1.40183, 1.449675, 1.767702]),
    "lstmLayer_11": (0, 1, 6, 5, 4, True, 0.0, [0, 1, 2, 3, 5],
                     [[0, 0, 0, 0, 0],
                      [0, 0, 0, 0, 0.61209],
                      [0, 0, 0, 0, 0.652042],
                      [0, 0, 0, 0.677708, 0.684177],
                      [0, 0, 0.699627, 0.705371, 0.710989],
                      [0, 0.719014, 0.724087, 0.729084, 0.734004]],
                     [0, 0.719014, 0.699627, 0.677708, 0.61209],
                     [0, 2.092814, 2.08832, 2.009851, 1.646034]),
    "lstmLayer_12": (0, 3, 6, 5, 4, True, 0.0, [0, 1, 2, 3, 5],
                     [[(0, 0), (0.562925, -0.25361), (0.570404, -0.157103),
                       (0.57777, -0.116502), (0.585023, -0.100025)],
                      [(0, 0), (0, 0), (0.576568, -0.223072), (0.586163, -0.135714),
                       (0.595462, -0.094438)],
                      [(0, 0), (0, 0), (0, 0), (0.611224, -0.193473), (0.621298, -0.090626)],
                      [(0, 0), (0, 0), (0, 0), (0, 0), (0.655858, -0.098015)],
                      [(0, 0), (0, 0), (0, 0), (0, 0), (0.692315, -0.143704)],
                      [(0, 0), (0, 0), (0, 0), (0, 0), (0, 0)]],
                     [[0, 0.562925, 0.576568, 0.611224, 0.692315],
                      [0, -0.25361, -0.157103, -0.116502, -0.100025]],
                     [[0, 1.534275, 1.40183, 1.449675, 1.767702],
                      [0, -0.86636, -0.470245, -0.341856, -0.294986]]),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("test", sorted(LIBND4J, key=lambda t: int(t.split("_")[1])))
def test_libnd4j_expected_values(test, dtype):
    """Within the precision libnd4j's tests print (5-6 digits; its equalsTo allows 1e-5)."""
    df, dm, sL, bS, nIn, peepholes, clip, seq_len, h, hL, cL = LIBND4J[test]
    p = libnd4j_problem(df, dm, sL, bS, nIn, peepholes, seq_len, dtype)
    h = np.asarray(h, np.float64)
    # directionMode 3's (forward, backward) pairs: each a block of nOut features
    expected_h = (units(h).reshape(h.shape[:-1] + (6,)) if dm == 3 else units(h))
    expected = (expected_h, None if hL is None else units(hL), units(cL))
    for name, a, e in zip(("h", "hL", "cL"), run_op(p, df, dm, DEFAULT_ACTS, clip, **ALL),
                          expected):
        assert a.dtype == dtype, name
        if e is not None:
            np.testing.assert_allclose(a, e, rtol=0, atol=1e-5, err_msg=name)


# ---------------------------------------------------------------------------------------------
# torch.nn.LSTM: directionMode 0 and 3, default activations, packed for seqLen
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("dm,df,seq_len", [(0, 0, None), (0, 1, [5, 1, 3]), (3, 0, [5, 1, 3]),
                                           (3, 1, None)])
def test_op_vs_torch_lstm(dm, df, seq_len, dtype):
    torch = pytest.importorskip("torch")
    sL, bS, nIn, nOut = 5, 3, 4, 3
    p = cast(make_problem(500 + dm + df, df, dm, sL, bS, nIn, nOut, seq_len, peepholes=False),
             dtype)
    w = [a.astype(dtype) for a in output_weights(np.random.default_rng(600), p, df, dm)]
    D = 1 if dm == 0 else 2
    tdtype = torch.float64 if dtype == np.float64 else torch.float32
    model = torch.nn.LSTM(nIn, nOut, bidirectional=D == 2, batch_first=df == 1, dtype=tdtype)
    with torch.no_grad():
        for d, suffix in enumerate(["", "_reverse"][:D]):
            pick = (lambda a: a) if D == 1 else (lambda a, d=d: a[d])
            getattr(model, f"weight_ih_l0{suffix}").copy_(torch.from_numpy(pick(p["Wx"]).T))
            getattr(model, f"weight_hh_l0{suffix}").copy_(torch.from_numpy(pick(p["Wr"]).T))
            getattr(model, f"bias_ih_l0{suffix}").copy_(torch.from_numpy(pick(p["b"])))
            getattr(model, f"bias_hh_l0{suffix}").zero_()
    x = torch.from_numpy(p["x"]).requires_grad_()
    state = [torch.from_numpy(p[k].reshape(D, bS, nOut)).requires_grad_() for k in ("hI", "cI")]
    inp = x
    if seq_len is not None:
        inp = torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor(seq_len),
                                                      batch_first=df == 1, enforce_sorted=False)
    out, (hn, cn) = model(inp, tuple(state))
    if seq_len is not None:
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=df == 1,
                                                        total_length=sL)
    shape = (D, bS, nOut) if D == 2 else (bS, nOut)
    torch_out = [out, hn.reshape(shape), cn.reshape(shape)]
    loss = sum((torch.from_numpy(wk) * o).sum() for wk, o in zip(w, torch_out))
    loss.backward()
    fwd_tol, grad_tol = (1e-12, 1e-11) if dtype == np.float64 else (2e-6, 2e-5)
    for name, a, t in zip(("h", "hL", "cL"), run_op(p, df, dm, DEFAULT_ACTS, 0.0, **ALL),
                          torch_out):
        np.testing.assert_allclose(a, t.detach().numpy(), rtol=0, atol=fwd_tol, err_msg=name)
    g = run_bp(p, df, dm, DEFAULT_ACTS, 0.0, *w)
    expected = {"dLdx": x.grad.numpy(), "dLdhI": state[0].grad.numpy().reshape(p["hI"].shape),
                "dLdcI": state[1].grad.numpy().reshape(p["cI"].shape)}
    for name, key in (("dLdWx", "weight_ih"), ("dLdWr", "weight_hh"), ("dLdb", "bias_ih")):
        parts = [getattr(model, f"{key}_l0{s}").grad.numpy() for s in ["", "_reverse"][:D]]
        parts = [a.T if a.ndim == 2 else a for a in parts]
        expected[name] = parts[0] if D == 1 else np.stack(parts)
    for name, e in expected.items():
        np.testing.assert_allclose(getattr(g, name), e, rtol=0,
                                   atol=grad_tol * max(1.0, np.abs(e).max()), err_msg=name)


# ---------------------------------------------------------------------------------------------
# The quirks, one at a time
# ---------------------------------------------------------------------------------------------

def test_backward_direction_with_seq_len_runs_the_suffix_not_the_reversed_prefix():
    """directionMode 1 with seqLen runs each row's last L steps (h 0 before them, hL = h[sL-L]);
    the backward half of a bidirectional layer runs the reversed prefix (PyTorch's, ONNX's):
    the two differ, and without seqLen they agree."""
    sL, bS = 5, 3
    uni = make_problem(700, 0, 1, sL, bS, seq_len=[2, 5, 0])
    bi = make_problem(701, 0, 3, sL, bS, seq_len=[2, 5, 0])
    for k in ("Wx", "Wr", "b", "hI", "cI", "Wp"):
        bi[k][1] = uni[k]
    bi["x"] = uni["x"]
    h1, hL1, cL1 = run_op(uni, 0, 1, DEFAULT_ACTS, 0.0, **ALL)
    h3, hL3, cL3 = run_op(bi, 0, 3, DEFAULT_ACTS, 0.0, **ALL)
    assert np.all(h1[:3, 0] == 0) and np.all(h1[3:, 0] != 0)      # row 0: the last 2 steps
    assert np.all(h3[2:, 0, 2:] == 0) and np.all(h3[:2, 0, 2:] != 0)  # the first 2, reversed
    np.testing.assert_array_equal(hL1[0], h1[3, 0])
    np.testing.assert_array_equal(hL3[1, 0], h3[0, 0, 2:])
    np.testing.assert_allclose(h1[:, 1], h3[:, 1, 2:], rtol=0, atol=1e-15)  # a full row
    assert not np.allclose(h1[3:, 0], h3[:2, 0, 2:])
    # row 2 (length 0): zero final states, not hI, cI; no gradient reaches hI, cI
    for hL, cL in ((hL1, cL1), (hL3[1], cL3[1])):
        assert np.all(hL[2] == 0) and np.all(cL[2] == 0)
    g = run_bp(uni, 0, 1, DEFAULT_ACTS, 0.0, None, np.ones((bS, 2)), np.ones((bS, 2)))
    assert np.all(g.dLdhI[2] == 0) and np.all(g.dLdcI[2] == 0) and np.all(g.dLdhI[:2] != 0)
    # without seqLen the backward direction is the same either way
    uni["seqLen"] = bi["seqLen"] = None
    h1 = run_op(uni, 0, 1, DEFAULT_ACTS, 0.0)[0]
    h3 = run_op(bi, 0, 3, DEFAULT_ACTS, 0.0)[0]
    np.testing.assert_allclose(h1, h3[..., 2:], rtol=0, atol=1e-15)


def test_alpha_beta_and_cell_clip_are_rounded_to_float32():
    """libnd4j's T-args are floats: for float64 data the op computes with float32(0.1), the
    time-loop helpers with the value given."""
    p = make_problem(710, 0, 0, seq_len=None)
    args = [p[k] for k in ("x", "Wx", "Wr", "b", "hI", "cI")]
    h = cells.lstmLayer(*args[:3], args[3], None, *args[4:], p["Wp"], gateAct=3,
                        gateAlpha=0.1, gateBeta=0.3, cellClip=0.7)[0]
    rounded = dict(gate_act=3, gate_alpha=float(np.float32(0.1)),
                   gate_beta=float(np.float32(0.3)), cell_clip=float(np.float32(0.7)))
    exact = dict(gate_act=3, gate_alpha=0.1, gate_beta=0.3, cell_clip=0.7)
    np.testing.assert_array_equal(h, cells.lstmLayerTimeLoop(*args, Wp=p["Wp"], **rounded).h)
    assert np.abs(h - cells.lstmLayerTimeLoop(*args, Wp=p["Wp"], **exact).h).max() > 1e-9


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("code", range(11))
def test_derivatives_are_libnd4j_s_at_the_kinks_too(code, dtype):
    """Every code's derivative at points that include its kinks (the note's table: relu 0 at 0,
    leaky relu and ELU 1 at 0, thresholded relu 0 at alpha, hard sigmoid 0.2 at +-2.5), as the
    output gate's activation and as the candidate's: with x = hI = cI = 0 and no weights, the
    pre-activations are b, one point per unit."""
    alpha, beta = ALPHA_BETA.get(code, (0.0, 0.0))
    a, bt = float(np.float32(alpha)), float(np.float32(beta))   # the op's (float32)
    points = np.array([-3.0, -2.5, -0.5, 0.0, a, 0.7, 2.5, 3.0])
    n = len(points)
    grad = REF_ACTS[code][1](points, a, bt)
    zeros = [np.zeros(shape, dtype) for shape in ((1, 1, 1), (1, 4 * n), (n, 4 * n))]
    away = np.full(n, 1.0)                # i, f (and g or o) away from any kink
    # float32: a derivative computed from the activated value (1 - a², a(1 - a)) has an
    # absolute error of a few float32 ulps of 1
    rtol, atol = (1e-12, 0.0) if dtype == np.float64 else (1e-5, 2e-7)
    for place in ("gate", "cell"):
        b = np.concatenate([away, away, 0.5 * away, points] if place == "gate"
                           else [away, away, points, 0.5 * away]).astype(dtype)
        acts = {"gateAct": code if place == "gate" else 2, "gateAlpha": alpha,
                "gateBeta": beta, "cellAct": code if place == "cell" else 0,
                "cellAlpha": alpha, "cellBeta": beta}
        c = cells.lstmLayer(*zeros, b, **acts, retFullSeq=False, retLastC=True)[0][0]
        if place == "gate":   # L = sum(h): dL/db_o = tanh(c)·act'(z_o)
            g = cells.lstmLayer_bp(*zeros, b, dLdh=1.0, **acts)
            got, expected = g.dLdb[3 * n:], np.tanh(c) * grad
        else:                 # L = sum(cL): dL/db_g = σ(z_i)·act'(z_g)
            g = cells.lstmLayer_bp(*zeros, b, dLdcL=1.0, retFullSeq=False, retLastC=True,
                                   **acts)
            got, expected = g.dLdb[2 * n:3 * n], ref_act((2, 0.0, 0.0), away) * grad
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=place)


def test_float_seq_len_is_truncated():
    p = make_problem(720, 1, 2, seq_len=[3.9, 0.5, 2.0])
    q = dict(p, seqLen=np.array([3, 0, 2]))
    for a, b in zip(run_op(p, 1, 2, DEFAULT_ACTS, 0.0, **ALL), run_op(q, 1, 2, DEFAULT_ACTS,
                                                                       0.0, **ALL)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("df,dm", [(0, 2), (2, 3), (3, 4)])
def test_scalar_output_gradients_are_broadcast(df, dm):
    p = make_problem(730 + dm, df, dm, seq_len=[4, 2, 1])
    shapes = [a.shape for a in run_op(p, df, dm, DEFAULT_ACTS, 0.0, **ALL)]
    full = run_bp(p, df, dm, DEFAULT_ACTS, 0.0, *(np.full(s, v) for s, v in
                                                   zip(shapes, (0.5, -1.0, 2.0))))
    for scalars in ((0.5, -1.0, 2.0), (np.array(0.5), np.array(-1.0), np.array(2.0))):
        got = run_bp(p, df, dm, DEFAULT_ACTS, 0.0, *scalars)
        for name in GRADS:
            np.testing.assert_array_equal(getattr(got, name), getattr(full, name), name)


def test_only_requested_outputs_and_gradients_of_inputs_given():
    p = make_problem(740, 0, 2, optional=False, peepholes=False)
    x, Wx, Wr = p["x"], p["Wx"], p["Wr"]
    h, hL, cL = cells.lstmLayer(x, Wx, Wr, directionMode=2, **ALL)
    (only_cL,) = cells.lstmLayer(x, Wx, Wr, directionMode=2, retFullSeq=False, retLastC=True)
    np.testing.assert_array_equal(only_cL, cL)
    assert h.shape == (4, 3, 2) and hL.shape == cL.shape == (2, 3, 2)
    g = cells.lstmLayer_bp(x, Wx, Wr, dLdhL=np.ones_like(hL), directionMode=2,
                           retFullSeq=False, retLastH=True)
    assert g.dLdb is None and g.dLdhI is None and g.dLdcI is None and g.dLdWp is None
    assert g.dLdx.shape == x.shape and g.dLdWx.shape == Wx.shape and g.dLdWr.shape == Wr.shape


def test_no_input_is_modified():
    p = make_problem(750, 1, 1, seq_len=[4, 0, 2])
    keep = {k: None if v is None else v.copy() for k, v in p.items()}
    w = output_weights(np.random.default_rng(751), p, 1, 1)
    run_op(p, 1, 1, acts_for(5), 0.5, **ALL)
    run_bp(p, 1, 1, acts_for(5), 0.5, *w)
    for k, v in p.items():
        if v is not None:
            np.testing.assert_array_equal(v, keep[k], k)


@pytest.mark.parametrize("code", [5, 9])
def test_threads_split_the_units(code):
    """Two threads own half of the 24 units each (the generic row loops on part of a row): the
    same values as one thread, up to the order of the products' sums."""
    p = make_problem(770 + code, 1, 3, 5, 3, 7, 24, seq_len=[5, 2, 0])
    w = output_weights(np.random.default_rng(771), p, 1, 3)
    one = run_op(p, 1, 3, acts_for(code), 0.9, n_threads=1, **ALL)
    two = run_op(p, 1, 3, acts_for(code), 0.9, n_threads=2, **ALL)
    for a, b in zip(one, two):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)
    g1 = run_bp(p, 1, 3, acts_for(code), 0.9, *w, n_threads=1)
    g2 = run_bp(p, 1, 3, acts_for(code), 0.9, *w, n_threads=2)
    for name in GRADS:
        np.testing.assert_allclose(getattr(g1, name), getattr(g2, name), rtol=1e-12,
                                   atol=1e-12, err_msg=name)


# ---------------------------------------------------------------------------------------------
# Empty dimensions
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sL,bS,nIn,seq_len", [(0, 2, 3, None), (0, 2, 3, [0, 0]),
                                               (3, 0, 2, []), (3, 2, 0, [3, 1])])
@pytest.mark.parametrize("df,dm", [(0, 1), (1, 3), (3, 4)])
def test_empty_dimensions(sL, bS, nIn, seq_len, df, dm):
    p = make_problem(760, df, dm, sL, bS, nIn, 2, seq_len)
    ref = ref_layer(*(p[k] for k in ("x", "Wx", "Wr", "b", "seqLen", "hI", "cI", "Wp")), df, dm,
                    DEFAULT_ACTS, 0.0)
    got = run_op(p, df, dm, DEFAULT_ACTS, 0.0, **ALL)
    for a, r in zip(got, ref):
        assert a.shape == r.shape
        np.testing.assert_allclose(a, r, rtol=0, atol=1e-12)
    g = run_bp(p, df, dm, DEFAULT_ACTS, 0.0, *(np.ones(a.shape) for a in got))
    for name, gname in zip(INPUTS, GRADS):
        assert getattr(g, gname).shape == p[name].shape, gname
    if sL == 0 or bS == 0:
        assert not g.dLdWx.any() and not g.dLdb.any()


# ---------------------------------------------------------------------------------------------
# Bad input: a ValueError or TypeError naming the argument, what was expected and what given
# ---------------------------------------------------------------------------------------------

def _call(p, **kw):
    kw.setdefault("retFullSeq", True)
    return cells.lstmLayer(*(p[k] for k in ("x", "Wx", "Wr", "b", "seqLen", "hI", "cI", "Wp")),
                           **kw)


@pytest.mark.parametrize("kw,error,match", [
    (dict(gateAct=11), ValueError, r"gateAct: expected an activation code in \[0, 10\]"),
    (dict(cellAct=-1), ValueError, r"cellAct: .*got -1"),
    (dict(outAct=2.0), TypeError, r"outAct: expected an activation code, an int"),
    (dict(outAct=True), TypeError, r"outAct"),
    (dict(gateAlpha="0.1"), TypeError, r"gateAlpha: expected a float"),
    (dict(cellBeta=None), TypeError, r"cellBeta"),
    (dict(dataFormat=4), ValueError, r"dataFormat: expected one of 0 TNS"),
    (dict(dataFormat=3), ValueError, r"dataFormat: 3 \(T2NS\) goes with directionMode=4"),
    (dict(directionMode=5), ValueError, r"directionMode: expected one of 0 forward"),
    (dict(cellClip=-0.5), ValueError, r"cellClip: expected a float >= 0"),
    (dict(cellClip=float("nan")), ValueError, r"cellClip"),
    (dict(retFullSeq=1), TypeError, r"retFullSeq: expected True or False"),
    (dict(retFullSeq=False), ValueError, r"retFullSeq, retLastH, retLastC: expected at least"),
])
def test_bad_options(kw, error, match):
    with pytest.raises(error, match=match):
        _call(make_problem(800, 0, 0), **kw)


@pytest.mark.parametrize("df", [1, 2])
def test_extra_dimension_needs_time_major_x(df):
    with pytest.raises(ValueError, match=f"directionMode: 4 .* undefined in libnd4j with "
                                         f"dataFormat={df}"):
        _call(make_problem(801, df, 4), dataFormat=df, directionMode=4)


@pytest.mark.parametrize("change,error,match", [
    (dict(seqLen=np.array([0, 5, 1])), ValueError,
     r"seqLen: expected values in \[0, sL=4\] .* got values from 0 to 5"),
    (dict(seqLen=np.array([0, -1.0, 1])), ValueError, r"seqLen: expected values in"),
    (dict(seqLen=np.array([1, 2])), ValueError, r"seqLen: expected shape \(3,\) = \[bS\]"),
    (dict(seqLen=[1, 2, 3]), TypeError, r"seqLen: expected None or a numpy.ndarray"),
    (dict(seqLen=np.array([True, False, True])), TypeError, r"seqLen: .* got bool"),
    (dict(Wx=np.zeros((3, 8))), ValueError,
     r"Wx: expected shape \(2, 8\) = \[nIn, 4\*nOut\] .* got \(3, 8\)"),
    (dict(Wr=np.zeros((2, 2, 8))), ValueError, r"Wr: expected a 2-d array"),
    (dict(b=np.zeros(6)), ValueError, r"b: expected shape \(8,\)"),
    (dict(hI=np.zeros((2, 2))), ValueError, r"hI: expected shape \(3, 2\) = \[bS, nOut\]"),
    (dict(Wp=np.zeros(8)), ValueError, r"Wp: expected shape \(6,\)"),
    (dict(x=np.zeros((4, 3))), ValueError, r"x: expected a 3-d array TNS \[sL, bS, nIn\]"),
    (dict(cI=np.zeros((3, 2), np.float32)), TypeError, r"cI: expected dtype float64"),
    (dict(Wx=[[0.0] * 8] * 2), TypeError, r"Wx: expected a numpy.ndarray"),
])
def test_bad_arrays(change, error, match):
    p = make_problem(802, 0, 0)
    p.update(change)
    with pytest.raises(error, match=match):
        _call(p)


def test_bad_arrays_bidirectional():
    p = make_problem(803, 0, 3)
    with pytest.raises(ValueError, match=r"Wx: expected shape \(2, 2, 8\) = \[2, nIn, 4\*nOut\]"):
        _call(dict(p, Wx=p["Wx"][0]), directionMode=3)
    with pytest.raises(ValueError, match=r"hI: expected shape \(2, 3, 2\) = \[2, bS, nOut\]"):
        _call(dict(p, hI=p["hI"][0]), directionMode=3)


def test_bad_output_gradients():
    p = make_problem(804, 2, 3)
    args = [p[k] for k in ("x", "Wx", "Wr", "b", "seqLen", "hI", "cI", "Wp")]
    kw = dict(dataFormat=2, directionMode=3)
    with pytest.raises(ValueError, match=r"dLdh: expected shape \(3, 4, 4\) = "
                                         r"\[bS, 2\*nOut, sL\] \(or a scalar\), got \(3, 2, 4\)"):
        cells.lstmLayer_bp(*args, dLdh=np.zeros((3, 2, 4)), **kw)
    with pytest.raises(ValueError, match=r"dLdhL: expected an array with retLastH=True"):
        cells.lstmLayer_bp(*args, dLdh=0.0, retLastH=True, **kw)
    with pytest.raises(ValueError, match=r"dLdcL: expected None with retLastC=False"):
        cells.lstmLayer_bp(*args, dLdh=0.0, dLdcL=0.0, **kw)
    with pytest.raises(ValueError, match=r"dLdh, dLdhL, dLdcL: expected at least one"):
        cells.lstmLayer_bp(*args, retFullSeq=False, **kw)
    with pytest.raises(ValueError, match=r"dLdhL: expected shape \(2, 3, 2\) = "
                                         r"\[2, bS, nOut\]"):
        cells.lstmLayer_bp(*args, dLdhL=np.zeros((3, 2)), retFullSeq=False, retLastH=True,
                           **kw)
    with pytest.raises(TypeError, match=r"dLdh: expected dtype float64"):
        cells.lstmLayer_bp(*args, dLdh=np.zeros((3, 4, 4), np.float32), **kw)

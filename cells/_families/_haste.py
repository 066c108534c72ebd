"""The time loop of haste's LayerNorm LSTM, LayerNorm GRU and IndRNN, which map their
parameters alike: their biases and gains are the loop's P (include/cells/layer_norm_impl.h and
indrnn_impl.h say which blocks; each family's module packs and unpacks them)."""
from cells._families._declaration import zoned


def forward(backend, family, dims, x, Wx, Wh, b, P, hI, cI, keep, n_threads, seq_len=None, fwd=True,
            zoneout=None, c_steps=False):
    """Run the forward of `family` ("layer_norm_lstm", "layer_norm_gru", "indrnn"; Wh None
    for the IndRNN, b None but for the IndRNN, cI None but for the LSTM); return (h
    [sL, bS, nOut], hL, cL [bS, nOut], c [sL, bS, nOut], gates [sL, bS, G], aux): with
    keep, c (the LSTM's), gates and aux (the LayerNorm cells') are every step's; without,
    they are None (c is every step's with c_steps). zoneout: None, or zoneout's share of the
    new state, [1] or [sL, bS, nOut] (the time loop's zone)."""
    h, hL, cL, gates, c, aux, _ = backend.forward(
        family, dims, x, hI, keep, n_threads, seq_len, fwd, cI=cI, Wx=Wx, Wh=Wh, b=b, P=P,
        c_steps=c_steps, **zoned(zoneout))
    return h, hL, cL, c, gates, aux


def backward(backend, family, dims, x, Wx, Wh, b, P, hI, cI, saved, dLdh, dLdc, dLdhL, dLdcL,
             n_threads, seq_len=None, fwd=True, zoneout=None, input_grad=True):
    """Run the backward of `family` on `saved` = (h, c, gates, aux) from forward with keep
    (None: run it first); dLdh and dLdc [sL, bS, nOut] (every step's h and c), dLdhL and
    dLdcL [bS, nOut] may each be None. Return (dLdx, dLdWx, dLdWh (None for the IndRNN),
    dLdb (the IndRNN's; else None), dLdP, dLdhI, dLdcI (the LSTM's)); gates and aux are
    consumed."""
    if saved is None:
        h, _, _, c, gates, aux = forward(backend, family, dims, x, Wx, Wh, b, P, hI, cI, True,
                                         n_threads, seq_len, fwd, zoneout)
    else:
        h, c, gates, aux = saved
    dLdx, dLdhI, dLdcI, dLdWx, dLdWh, dLdb, dLdP, _ = backend.backward(
        family, dims, x, hI, (h, gates, c, aux, None), n_threads, seq_len, fwd, cI=cI,
        dLdh=dLdh, dLdc=dLdc, dLdhL=dLdhL, dLdcL=dLdcL, Wx=Wx, Wh=Wh, P=P,
        input_grad=input_grad, bias=b is not None, **zoned(zoneout))
    return dLdx, dLdWx, dLdWh, dLdb, dLdP, dLdhI, dLdcI

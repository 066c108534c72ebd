"""The family functions of every backend (gru_forward, ..., rnn_backward: cells/_cpu.py's
docstring states their contract), written once on a backend's two generic time loops.

A backend supplies
    forward(family, dims, x, hI, keep, n_threads, seq_len, fwd, **arrays and options)
        -> (h, hL, cL, gates, c, aux, m)
    backward(family, dims, x, hI, saved, n_threads, seq_len, fwd, **arrays and options)
        -> (dLdx, dLdhI, dLdcI, dLdWx, dLdWh, dLdb, dLdP, dLdWproj)
(cells._cpu._forward and _backward document the arrays and options) and its array module; this
class maps each family's parameters onto them (cells/_params.py) and back.
"""
from cells._params import (
    RNN_ACTIVATIONS, gru_bias_grad, gru_family, initial_state, kernel_clip, rnn_bias,
    rnn_bias_grad, split_gru_bias,
)
from cells._time_loop import LSTM_ACTIVATIONS


class FamilyCalls:
    """The family functions on `forward` and `backward`; `array_module(a)` is the module
    (numpy, cupy) of a call's array `a`, for the arrays these functions make."""

    def __init__(self, forward, backward, array_module):
        self._forward, self._backward, self._xp = forward, backward, array_module

    # -----------------------------------------------------------------------------------------
    # GRU
    # -----------------------------------------------------------------------------------------

    def gru_forward(self, dims, x, hI, Wx, Wh, b, lbr, keep, n_threads, seq_len=None,
                    fwd=True, zoneout=None):
        """Run the GRU forward (linear_before_reset `lbr`); return (h [sL, bS, nOut], gates
        [sL, bS, 3nOut], hc [sL, bS, nOut]): with keep, gates and hc are every step's (hc None
        without lbr); without, both are None. h is 0 at padded steps. zoneout: None, or
        zoneout's share of the new state, [1] or [sL, bS, nOut] (the time loop's zone)."""
        bx, bhc = split_gru_bias(self._xp(x), b, dims[3], lbr)
        h, _, _, gates, _, hc, _ = self._forward(gru_family(lbr), dims, x, hI, keep, n_threads,
                                                 seq_len, fwd, Wx=Wx, Wh=Wh, b=bx, P=bhc,
                                                 **_zoned(zoneout))
        return h, gates, hc

    def gru_backward(self, dims, x, hI, Wx, Wh, b, lbr, saved, dLdh, dLdhLast, dLdgates,
                     n_threads, seq_len=None, fwd=True, input_grad=True, zoneout=None):
        """Run the GRU backward on `saved` = (h, gates, hc) from gru_forward with keep (None:
        run it first); dLdh [sL, bS, nOut], dLdhLast [bS, nOut] and dLdgates [sL, bS, 3nOut]
        (the gradients arriving at the activated gates) may each be None. Return (dLdx
        [sL, bS, nIn], dLdhI [bS, nOut], dLdWx [nIn, 3nOut], dLdWh [nOut, 3nOut], dLdb in b's
        layout); gates and hc are consumed."""
        xp = self._xp(x)
        if saved is None:
            saved = self.gru_forward(dims, x, hI, Wx, Wh, b, lbr, True, n_threads, seq_len, fwd,
                                     zoneout)
        h, gates, hc = saved
        _, bhc = split_gru_bias(xp, b, dims[3], lbr)
        dLdx, dLdhI, _, dLdWx, dLdWh, dLdbx, dLdbhc, _ = self._backward(
            gru_family(lbr), dims, x, hI, (h, gates, None, hc, None), n_threads, seq_len, fwd,
            dLdh=dLdh, dLdhL=dLdhLast, dLdgates=dLdgates, Wx=Wx, Wh=Wh, P=bhc,
            input_grad=input_grad, **_zoned(zoneout))
        return dLdx, dLdhI, dLdWx, dLdWh, gru_bias_grad(xp, b, dLdbx, dLdbhc, lbr)

    # -----------------------------------------------------------------------------------------
    # LSTM
    # -----------------------------------------------------------------------------------------

    def lstm_forward(self, dims, x, Wx, Wr, b, hI, cI, Wp, Wproj, clip, lengths, fwd, keep,
                     n_threads, acts=LSTM_ACTIVATIONS, zoneout=None, c_steps=False):
        """Run the LSTM forward (b, hI, cI, Wp, Wproj may be None; clip is cell_clip, 0: none;
        acts the (code, alpha, beta) of the gate, cell and output activations); nState = nOut,
        or nProj with Wproj [nOut, nProj]. Return (h [sL, bS, nState], hL [bS, nState], cL
        [bS, nOut], c [sL, bS, nOut], gates [sL, bS, 4nOut], m [sL, bS, nOut]): with keep, c,
        gates and (with Wproj) m are every step's; without, all three are None (c is every
        step's with c_steps). zoneout as gru_forward's."""
        xp = self._xp(x)
        _, bS, _, nOut = dims
        nState = nOut if Wproj is None else Wproj.shape[1]
        h, hL, cL, gates, c, _, m = self._forward(
            "lstm", dims, x, initial_state(xp, hI, bS, nState, x.dtype), keep, n_threads,
            lengths, fwd, cI=initial_state(xp, cI, bS, nOut, x.dtype), Wx=Wx, Wh=Wr, b=b, P=Wp,
            Wproj=Wproj, clip=kernel_clip(clip), lstm_acts=acts, c_steps=c_steps,
            **_zoned(zoneout))
        return h, hL, cL, c, gates, m

    def lstm_backward(self, dims, x, Wx, Wr, b, hI, cI, Wp, Wproj, clip, lengths, fwd, saved,
                      dLdh, dLdhL, dLdcL, n_threads, acts=LSTM_ACTIVATIONS, input_grad=True,
                      zoneout=None, dLdc=None):
        """Run the LSTM backward on `saved` = (h, c, gates, m) from lstm_forward with keep and
        the same acts (None: run it first); dLdh [sL, bS, nState], dLdhL [bS, nState] and
        dLdcL [bS, nOut] may each be None. Return (dLdx [sL, bS, nIn], dLdWx [nIn, 4nOut],
        dLdWr [nState, 4nOut], dLdb [4nOut] (None when b is None), dLdhI [bS, nState], dLdcI
        [bS, nOut], dLdWp [3nOut] (None when Wp is None), dLdWproj [nOut, nProj] (None when
        Wproj is None)); gates are consumed. dLdc [sL, bS, nOut] or None: the gradient arriving
        at every step's c; zoneout as lstm_forward's."""
        xp = self._xp(x)
        _, bS, _, nOut = dims
        nState = nOut if Wproj is None else Wproj.shape[1]
        if saved is None:
            h, _, _, c, gates, m = self.lstm_forward(dims, x, Wx, Wr, b, hI, cI, Wp, Wproj, clip,
                                                     lengths, fwd, True, n_threads, acts,
                                                     zoneout)
        else:
            h, c, gates, m = saved
        dLdx, dLdhI, dLdcI, dLdWx, dLdWr, dLdb, dLdWp, dLdWproj = self._backward(
            "lstm", dims, x, initial_state(xp, hI, bS, nState, x.dtype), (h, gates, c, None, m),
            n_threads, lengths, fwd, cI=initial_state(xp, cI, bS, nOut, x.dtype), dLdh=dLdh,
            dLdhL=dLdhL, dLdcL=dLdcL, Wx=Wx, Wh=Wr, P=Wp, Wproj=Wproj, clip=kernel_clip(clip),
            lstm_acts=acts, input_grad=input_grad, dLdc=dLdc, **_zoned(zoneout))
        return dLdx, dLdWx, dLdWr, None if b is None else dLdb, dLdhI, dLdcI, dLdWp, dLdWproj

    # -----------------------------------------------------------------------------------------
    # LLTM (its weights W [3S, S + nIn] in PyTorch's layout, columns h then x)
    # -----------------------------------------------------------------------------------------

    def lltm_forward(self, dims, x, W, b, hI, cI, lens, fwd, keep, n_threads, z=None):
        """Run the LLTM forward; return (h [sL, bS, S], hL, cL [bS, S], gates [sL, bS, 3S],
        c [sL, bS, S]): with keep, gates and c are every step's; without, both are None. z,
        when given, is a [bS, 3S] array that receives the pre-activations of the last step
        (all rows active)."""
        h, hL, cL, gates, c, _, _ = self._forward("lltm", dims, x, hI, keep, n_threads, lens,
                                                  fwd, cI=cI, z=z, W=W, b=b)
        return h, hL, cL, gates, c

    def lltm_backward(self, dims, x, W, hI, cI, fwd, saved, dLdh, dLdhL, dLdcL, n_threads,
                      b=None, lens=None, input_grad=True):
        """Run the LLTM backward on `saved` = (h, gates, c) from lltm_forward with keep (None:
        run it first, on b and cI); dLdh [sL, bS, S], dLdhL and dLdcL [bS, S] may each be
        None. Return (dLdx [sL, bS, nIn], dLdW [3S, S+nIn], dLdb [3S], dLdhI, dLdcI [bS, S]);
        gates are consumed."""
        if saved is None:
            h, _, _, gates, c = self.lltm_forward(dims, x, W, b, hI, cI, lens, fwd, True,
                                                  n_threads)
        else:
            h, gates, c = saved
        # The LLTM's backward does not read the initial cell state (c = cPrev + n∘i): the
        # cell's backward (lltm_backward) has none to give.
        _, bS, _, S = dims
        dLdx, dLdhI, dLdcI, dLdW, _, dLdb, _, _ = self._backward(
            "lltm", dims, x, hI, (h, gates, c, None, None), n_threads, lens, fwd,
            cI=initial_state(self._xp(x), cI, bS, S, x.dtype), dLdh=dLdh, dLdhL=dLdhL,
            dLdcL=dLdcL, W=W, input_grad=input_grad)
        return dLdx, dLdW, dLdb, dLdhI, dLdcI

    # -----------------------------------------------------------------------------------------
    # RNN
    # -----------------------------------------------------------------------------------------

    def rnn_forward(self, dims, x, hI, Wx, Wh, b, activation, keep, n_threads, seq_len=None,
                    fwd=True):
        """Run the RNN forward (activation "tanh" or "relu"); return (h [sL, bS, nOut], hL
        [bS, nOut], gates [sL, bS, nOut]): gates, every step's act(z), with keep, else None."""
        h, hL, _, gates, _, _, _ = self._forward(
            "rnn", dims, x, hI, keep, n_threads, seq_len, fwd, Wx=Wx, Wh=Wh, b=rnn_bias(b),
            activation=RNN_ACTIVATIONS[activation])
        return h, hL, gates

    def rnn_backward(self, dims, x, hI, Wx, Wh, b, activation, saved, dLdh, dLdhLast,
                     n_threads, seq_len=None, fwd=True, input_grad=True):
        """Run the RNN backward on `saved` = (h, gates) from rnn_forward with keep (None: run
        it first); dLdh [sL, bS, nOut] and dLdhLast [bS, nOut] may each be None. Return (dLdx
        [sL, bS, nIn], dLdhI [bS, nOut], dLdWx [nIn, nOut], dLdWh [nOut, nOut], dLdb in b's
        layout); gates are consumed."""
        if saved is None:
            h, _, gates = self.rnn_forward(dims, x, hI, Wx, Wh, b, activation, True, n_threads,
                                           seq_len, fwd)
        else:
            h, gates = saved
        dLdx, dLdhI, _, dLdWx, dLdWh, dLdb, _, _ = self._backward(
            "rnn", dims, x, hI, (h, gates, None, None, None), n_threads, seq_len, fwd,
            dLdh=dLdh, dLdhL=dLdhLast, Wx=Wx, Wh=Wh, activation=RNN_ACTIVATIONS[activation],
            input_grad=input_grad)
        return dLdx, dLdhI, dLdWx, dLdWh, rnn_bias_grad(self._xp(x), b, dLdb)


    # -----------------------------------------------------------------------------------------
    # haste's LayerNorm LSTM, LayerNorm GRU and IndRNN: their biases and gains are the loop's P
    # (include/cells/layer_norm_impl.h and indrnn_impl.h say which blocks)
    # -----------------------------------------------------------------------------------------

    def haste_forward(self, family, dims, x, Wx, Wh, b, P, hI, cI, keep, n_threads,
                      seq_len=None, fwd=True, zoneout=None, c_steps=False):
        """Run the forward of `family` ("layer_norm_lstm", "layer_norm_gru", "indrnn"; Wh None
        for the IndRNN, b None but for the IndRNN, cI None but for the LSTM); return (h
        [sL, bS, nOut], hL, cL [bS, nOut], c [sL, bS, nOut], gates [sL, bS, G], aux): with
        keep, c (the LSTM's), gates and aux (the LayerNorm cells') are every step's; without,
        they are None (c is every step's with c_steps). zoneout as gru_forward's."""
        h, hL, cL, gates, c, aux, _ = self._forward(family, dims, x, hI, keep, n_threads,
                                                    seq_len, fwd, cI=cI, Wx=Wx, Wh=Wh, b=b,
                                                    P=P, c_steps=c_steps, **_zoned(zoneout))
        return h, hL, cL, c, gates, aux

    def haste_backward(self, family, dims, x, Wx, Wh, b, P, hI, cI, saved, dLdh, dLdc, dLdhL,
                       dLdcL, n_threads, seq_len=None, fwd=True, zoneout=None,
                       input_grad=True):
        """Run the backward of `family` on `saved` = (h, c, gates, aux) from haste_forward with
        keep (None: run it first); dLdh and dLdc [sL, bS, nOut] (every step's h and c), dLdhL
        and dLdcL [bS, nOut] may each be None. Return (dLdx, dLdWx, dLdWh (None for the
        IndRNN), dLdb (the IndRNN's; else None), dLdP, dLdhI, dLdcI (the LSTM's)); gates and
        aux are consumed."""
        if saved is None:
            h, _, _, c, gates, aux = self.haste_forward(family, dims, x, Wx, Wh, b, P, hI, cI,
                                                        True, n_threads, seq_len, fwd, zoneout)
        else:
            h, c, gates, aux = saved
        dLdx, dLdhI, dLdcI, dLdWx, dLdWh, dLdb, dLdP, _ = self._backward(
            family, dims, x, hI, (h, gates, c, aux, None), n_threads, seq_len, fwd, cI=cI,
            dLdh=dLdh, dLdc=dLdc, dLdhL=dLdhL, dLdcL=dLdcL, Wx=Wx, Wh=Wh, P=P,
            input_grad=input_grad, bias=b is not None, **_zoned(zoneout))
        return dLdx, dLdWx, dLdWh, dLdb, dLdP, dLdhI, dLdcI


def _zoned(zoneout):
    """The loop's zoneout keyword, left out where zoneout is None: every backend runs a call
    without it."""
    return {} if zoneout is None else {"zoneout": zoneout}

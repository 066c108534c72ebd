"""Gate orders: each framework's gates named by cells' letters (GRU r, u, c; LSTM i, f, g, o),
and the permutation of gate blocks between two orders (cells.convert, cells.onnx)."""
from cells._arrays import array_module

GRU = TORCH_GRU = "ruc"
KERAS_GRU = ONNX_GRU = "urc"
LSTM = TORCH_LSTM = KERAS_LSTM = "ifgo"
HASTE_LSTM = "igfo"
HASTE_GRU = "urc"
ONNX_LSTM = "iofg"
PEEPHOLES, ONNX_PEEPHOLES = "ifo", "iof"


def reorder(a, src, dst, axis=-1):
    """A new C-contiguous array: `a` with its gate blocks along `axis` (len(src) equal blocks,
    in the order `src`) in the order `dst`. Orders are strings of cells' gate letters:
    reorder(W, "urc", "ruc", axis=0) takes ONNX's (z, r, h) rows to cells' (r, u, c)."""
    xp = array_module(a)
    blocks = dict(zip(src, xp.split(a, len(src), axis=axis)))
    return xp.concatenate([blocks[gate] for gate in dst], axis=axis)

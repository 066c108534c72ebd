"""cells.torch.convert: torch.nn's recurrent modules, anywhere in a model, as cells.torch's."""
import copy

import torch

from cells.torch._modules import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell

# ---------------------------------------------------------------------------------------------
# convert
# ---------------------------------------------------------------------------------------------

_CELLS_CLASSES = {torch.nn.GRU: GRU, torch.nn.LSTM: LSTM, torch.nn.RNN: RNN,
                  torch.nn.GRUCell: GRUCell, torch.nn.LSTMCell: LSTMCell,
                  torch.nn.RNNCell: RNNCell}


def convert(module: torch.nn.Module) -> torch.nn.Module:
    """The cells-backed version of torch.nn recurrent modules.

    Parameters of a converted submodule are new tensors: create the optimizer after convert().

    Parameters
    ----------
    module : torch.nn.Module
        A torch.nn.GRU, LSTM, RNN, GRUCell, LSTMCell or RNNCell (exactly that class, not a
        subclass), or any other module.

    Returns
    -------
    torch.nn.Module
        For one of those six classes: a copy of it as cells.torch's class, with equal parameters
        (its own tensors), hooks and mode. For any other module: the module itself, every such
        submodule, at any depth, replaced in place by its copy (a submodule used at several
        places by one copy).

    Examples
    --------
    >>> import torch
    >>> import cells.torch as ct
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    >>> model.rnn = torch.nn.GRU(4, 8)
    >>> type(ct.convert(model).rnn).__module__
    'cells.torch'
    """
    return _convert(module, {})


def _convert(module, converted):
    if id(module) in converted:
        return converted[id(module)]
    cells_class = _CELLS_CLASSES.get(type(module))
    if cells_class is not None:
        result = copy.deepcopy(module)
        result.__class__ = cells_class
    else:
        # every name of every child (named_children() skips a second name of one module)
        for name, child in list(module._modules.items()):
            if child is not None:
                setattr(module, name, _convert(child, converted))
        result = module
    converted[id(module)] = result
    return result



"""Each cell family declared once for Python, one module a family: its declaration (what its
time loop takes and returns, cells/_families/_declaration.py says how a declaration reads) and
its mapping (how its face's parameters become the time loop's, and the loop's results its
gradients).

The C side declares what a family's step is (include/cells/family_rows.h: its gate blocks, cell
state, phases, ...); these modules declare how Python calls it. Everything that treats the
families alike reads FAMILIES instead of listing the families again:

- the faces' shape and dtype checks (cells._validate.arguments, for the families whose faces
  take their declared arguments);
- ``python -m cells`` checks and times every family and variant (cells/__main__.py);
- the benchmarks build their inputs and call cells from them (benchmarks/families.py);
- the tests hold every declared family to the shared checks (tests/test_families.py says which);
- cells.torch generates its custom operators from them (with Family.torch, what an operator
  adds: the options it fixes or passes through, and its optional arrays).
"""
from cells._families import gru, indrnn, layer_norm_gru, layer_norm_lstm, lltm, lstm, rnn
from cells._families._declaration import Dims, Family

__all__ = ["FAMILIES", "Dims", "Family"]

FAMILIES = {module.FAMILY.name: module.FAMILY
            for module in (gru, lstm, lltm, rnn, layer_norm_lstm, layer_norm_gru, indrnn)}

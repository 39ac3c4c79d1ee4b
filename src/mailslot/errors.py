"""Public alias of :mod:`mailslot.core.errors` (the tree is drawn there): every class in it.

The names come from that module's ``__all__``, so a class added there is exported here too.
"""

from mailslot.core.errors import *  # noqa: F403 (its ``__all__`` is the list of classes)
from mailslot.core.errors import __all__ as __all__

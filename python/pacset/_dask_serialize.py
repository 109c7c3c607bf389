"""Dask ships a pacset.Forest as its packed bytes (frames), never as a pickle.

install() registers dask_serialize / dask_deserialize for Forest when
distributed is already imported, and otherwise as soon as it is: importing
distributed costs about a second, which `import pacset` should not pay for
users who never use Dask.
"""

import importlib.abc
import sys

_SERIALIZE_MODULE = "distributed.protocol.serialize"

# Forests deserialized by this process (a worker receives a broadcast forest
# once, whatever the number of tasks that use it).
deserialized = 0


def _register(serialize_module):
    from . import Forest

    @serialize_module.dask_serialize.register(Forest)
    def _serialize_forest(forest):
        return forest.frames()

    @serialize_module.dask_deserialize.register(Forest)
    def _deserialize_forest(header, frames):
        global deserialized
        deserialized += 1
        return Forest.from_frames(header, frames)


class _RegisterOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the loader of distributed.protocol.serialize
    so that the registration runs right after that module is executed."""

    def find_spec(self, name, path, target=None):
        if name != _SERIALIZE_MODULE:
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_register(module):
            exec_module(module)
            _register(module)

        spec.loader.exec_module = exec_and_register
        return spec


def install():
    module = sys.modules.get(_SERIALIZE_MODULE)
    if module is not None:
        _register(module)
    elif not any(isinstance(f, _RegisterOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterOnImport())

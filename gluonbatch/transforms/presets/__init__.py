"""The presets, one module per detector as in ``gluoncv.data.transforms.presets``."""

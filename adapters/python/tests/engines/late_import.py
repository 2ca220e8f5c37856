"""A test engine that imports a package before the SDK: the sandbox refuses to start."""

import pluggy  # noqa: F401  (any installed package will do)

import turnsim_sdk  # noqa: E402

turnsim_sdk.run_engine(lambda host: None)

"""turnsim's Python SDK for the engine protocol (docs/protocol.md).

Import it before anything else: its first import installs the sandbox
(virtual time, seeded randomness, stdout kept for the protocol), and a
library loaded earlier could keep the real clock.

    import turnsim_sdk  # first
    from turnsim_sdk import run_engine

    run_engine(lambda host: MyEngine(host))
"""

from . import sandbox  # noqa: F401  (first: it installs itself)
from . import messages
from .host import PROTOCOL_VERSION, Chat, Connection, Host, HookFailed, PostRefused, run_engine
from .model import ModelCall, ModelCallCancelled, ModelHttpError, ModelStreamCut
from .sandbox import clock
from .seeding import generation_seed
from .store import Store, Write, apply_write

__all__ = [
    "PROTOCOL_VERSION", "Chat", "Connection", "Host", "HookFailed", "PostRefused", "run_engine", "ModelCall",
    "ModelCallCancelled", "ModelHttpError", "ModelStreamCut", "clock", "generation_seed", "Store", "Write",
    "apply_write", "messages",
]

"""A turn engine for turnsim built from LangGraph: the prebuilt ReAct agent
over the harness's model, tools and store (session.py says which decisions
are LangGraph's and which are ours). Run it under the harness:

    turnsim run scenarios/ --engine-cmd "python adapters/langgraph/engine.py"
"""

import turnsim_sdk  # first: virtual time and seeded randomness before LangChain loads

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from session import Session  # noqa: E402
from turnsim_sdk import run_engine  # noqa: E402

# What it implements of the protocol's capabilities: capabilities.json is the one list.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "capabilities.json")) as listed:
    CAPABILITIES = [name for name, has in json.load(listed)["capabilities"].items() if has]

if __name__ == "__main__":
    # Every `init` is served by a child forked after LangChain and LangGraph loaded (0.7 s of CPU
    # a process saved per run and per eviction), and all of a run's state lives in its Session.
    run_engine(Session, capabilities=CAPABILITIES, fork=True)

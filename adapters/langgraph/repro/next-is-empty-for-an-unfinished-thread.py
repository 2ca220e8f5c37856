"""After a crash between a task's saved writes and the step's checkpoint,
`get_state(config).next` is empty although the thread is not finished:
invoking it with no input runs the next node. LangGraph's persistence docs
describe `next` as "A tuple of the node names to execute next in the
graph"; the pinned docstring (langgraph/types.py, StateSnapshot.next) says
"The name of the node to execute in each task for this step", which a task
with saved writes is not: the two texts disagree, and code that follows
the docs ("resume while `next` is not empty") loses the turn. `tasks`
shows the step (its tasks carry their saved writes). Needs only the
pinned packages; exits 1 while `next` is empty for a thread that still
has a node to run, 0 otherwise.

    python adapters/langgraph/repro/next-is-empty-for-an-unfinished-thread.py
"""

import sys
from typing import TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    visited: list


class Crash(Exception):
    """The process dies right after the first node's writes were saved."""


class CrashingSaver(InMemorySaver):
    crash_at_step = None

    def put(self, config, checkpoint, metadata, new_versions):
        if metadata.get("step") == self.crash_at_step:
            raise Crash()
        return super().put(config, checkpoint, metadata, new_versions)


def build(saver):
    graph = StateGraph(State)
    graph.add_node("first", lambda state: {"visited": state["visited"] + ["first"]})
    graph.add_node("second", lambda state: {"visited": state["visited"] + ["second"]})
    graph.add_edge(START, "first")
    graph.add_edge("first", "second")
    graph.add_edge("second", END)
    return graph.compile(checkpointer=saver)


def main():
    saver = CrashingSaver()
    graph = build(saver)
    config = {"configurable": {"thread_id": "t"}}
    saver.crash_at_step = 1  # the checkpoint after "first": its writes are already saved
    try:
        graph.invoke({"visited": []}, config, durability="sync")
    except Crash:
        pass
    saver.crash_at_step = None
    state = graph.get_state(config)
    print(f"after the crash: next={state.next!r}, tasks={[task.name for task in state.tasks]!r}")
    result = graph.invoke(None, config, durability="sync")
    print(f"invoked with no input, it ran on: visited={result['visited']!r}")
    still_to_run = "second" in result["visited"]
    if state.next == () and still_to_run:
        print('docs (persistence): "next: A tuple of the node names to execute next in the graph" -- it was empty')
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The store's message vocabulary (`Message` and `Part` in
engine/src/transcript.rs), for engines that build stored messages."""


def user_message(message_id, text):
    """A stored user message with one text part, as the built-in engine stores it."""
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "id": "user", "text": text, "state": "done"}]}


def text_part(part_id, text, state="done"):
    return {"type": "text", "id": part_id, "text": text, "state": state}


def tool_part(call_id, tool_name, state, *, input_text="", input=None, output=None, error_text=None, approval=None,
              repaired=False, dynamic=False):
    """A stored tool part (`dynamic` is left out when false, as the built-in engine stores it)."""
    part = {"type": "tool", "call_id": call_id, "tool_name": tool_name, "state": state, "input_text": input_text,
            "input": input, "output": output, "error_text": error_text, "approval": approval, "repaired": repaired}
    if dynamic:
        part["dynamic"] = True
    return part

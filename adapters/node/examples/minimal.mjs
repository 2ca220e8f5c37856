// A minimal engine: one user message (or `chat()`) → one model call with the
// AI SDK → text streamed to every connection and the chat callback → the
// assistant message stored → idle. No tools, no retries, no recovery.
//
//   turnsim run scenarios/messenger-done.yaml --engine-cmd "node adapters/node/examples/minimal.mjs"

import { runEngine, chunks, messages, Write } from "../index.mjs";
import { streamText } from "ai";

runEngine((host) => {
  let nextId = host.store.state.next_id;
  const newId = (prefix) => `${prefix}${++nextId}`;
  let turns = Promise.resolve(); // one turn at a time, in arrival order
  let live = null; // the assistant message being streamed, for clients that connect mid-turn
  const assistantMessage = (id, text) => ({
    id,
    role: "assistant",
    parts: [{ type: "step-start" }, ...(text ? [{ type: "text", id: "text-1", text, state: "done" }] : [])],
  });
  const transcript = () => [...host.store.state.messages, ...(live ? [assistantMessage(live.id, live.text)] : [])];
  // Each model request carries the transcript as stored, ids included: the
  // oracle ties a model call to the messages it was shown by them.
  host.model.transcript = transcript;

  async function turn(text, chat) {
    const requestId = newId("r");
    chat?.onStart(requestId);
    const user = messages.userMessage(newId("m"), text);
    const assistantId = newId("m");
    await host.store.commit([{ NextId: nextId }, Write.putMessage(user)]);
    await host.broadcast({ Messages: host.store.state.messages });
    // Annotations for the timeline (never judged).
    const kind = chat ? "chat" : "user";
    host.observe({ event: "turn-started", request_id: requestId, kind, message_id: assistantId });
    const history = host.store.state.messages.map(messages.toUIMessage);
    const result = streamText({
      model: host.model,
      messages: history.map((m) => ({ role: m.role, content: m.parts.map((p) => p.text ?? "").join("") })),
      providerOptions: { turnsim: { requestId, step: 1 } },
    });
    live = { id: assistantId, text: "" };
    let failure = null;
    try {
      for await (const part of result.fullStream) {
        const chunk = chunks.fromStreamPart(part);
        if (chunk?.type === "error") failure = chunk.message;
        if (!chunk || chunk.type.startsWith("finish") || chunk.type === "error") continue;
        if (chunk.type === "text-delta") live.text += chunk.delta;
        await host.broadcast({ Chunk: { request_id: requestId, message_id: assistantId, chunk } });
        chat?.onEvent(chunk);
      }
    } catch (error) {
      failure = chunks.errorText(error);
    }
    await host.store.commit([Write.putMessage(assistantMessage(assistantId, live.text))]);
    live = null;
    if (failure) {
      await host.broadcast({ Error: { request_id: requestId, message: failure } });
      chat?.onError(failure);
    } else {
      await host.broadcast({ Done: { request_id: requestId, continuation: false } });
      chat?.onDone();
    }
    host.observe({ event: "turn-finished", request_id: requestId, kind, status: failure ? "error" : "completed" });
    chat?.returned();
  }

  const enqueue = (text, chat) => (turns = turns.then(() => turn(text, chat)));
  return {
    connect: (connection) => connection.send({ Messages: transcript() }),
    userMessage: (text) => enqueue(text),
    chat: (chat, text) => enqueue(text, chat),
  };
}, { reinit: true, module: import.meta.url }); // all state lives in this closure; a fresh module instance per generation

// Messenger deliveries, after Think's `delivery.ts` (not published in
// `agents`, so this is ours): a delivery drives a chat turn with a
// text-collecting callback and posts the reply once; its checkpoint moves
// `accepted` → `streaming` (first text) → `completed`, the post going out
// before the `completed` checkpoint as in Think. After a restart, an
// `accepted` delivery is answered again and a `streaming` one gets the
// interrupted apology.

import { Write } from "../node/index.mjs";

const EMPTY = "I couldn't produce a text response. Please try again.";
const ERROR = "Sorry, I couldn't answer that right now. Please try again.";
const INTERRUPTED = "Sorry, my reply was interrupted. Please send your message again if you'd like me to retry.";
/** The longest post when the config does not say (`messenger_post_limit_chars`). */
const SOFT_LIMIT_CHARS = 2_000;

class Collector {
  constructor(onFirstText) {
    this.text = "";
    this.outcome = null;
    this.onFirstText = onFirstText;
  }
  onEvent(chunk) {
    if (chunk.type !== "text-delta") return;
    if (this.text === "" && chunk.delta) this.onFirstText();
    this.text += chunk.delta;
  }
  onReset(text) {
    this.text = text;
  }
  onDone() {
    this.outcome ??= "done";
  }
  onError() {
    this.outcome ??= "error";
  }
  onInterrupted() {
    this.outcome ??= "interrupted";
  }
}

export class Messenger {
  constructor(session) {
    this.session = session;
    this.host = session.host;
  }

  async deliver(delivery, text) {
    // A delivery is answered once by its id: a platform that delivers it
    // again (a retried webhook) while it is answered, or after, gets nothing.
    if (this.host.store.state.deliveries[delivery]) return;
    await this.answer({ id: delivery, user_text: text, stage: "accepted" });
  }

  async answer(checkpoint, reanswer = false) {
    try {
      await this.checkpoint(checkpoint, "accepted");
    } catch (error) {
      // The store refused the delivery: it is answered with the error reply, once.
      await this.postAll(checkpoint.id, [ERROR]);
      return this.checkpoint(checkpoint, "completed").catch((refused) => this.host.log(refused.message));
    }
    let streaming = null;
    const collector = new Collector(() => {
      // A refused checkpoint fails the turn's own next commit; the delivery
      // still posts how the turn ended.
      streaming = this.checkpoint(checkpoint, "streaming").catch((refused) => this.host.log(refused.message));
    });
    const requestId = this.session.newId("r");
    this.host.observe({ event: "delivery-accepted", delivery_id: checkpoint.id, request_id: requestId });
    // A re-answer after a restart answers the stored message rather than storing it twice.
    // The dead turn's reply, if it holds no text yet (reasoning only: nothing was shown), is replaced by the new answer.
    // The delivery's message is the last user message with its text (a message that arrived over a
    // connection while the delivery's turn ran is stored after it), then its dead reply, if any.
    const messages = this.session.messages;
    const at = reanswer ? messages.findLastIndex((m) => m.role === "user" && m.parts[0]?.text === checkpoint.user_text) : -1;
    const next = at >= 0 ? messages[at + 1] : undefined;
    const replaces = next?.role === "assistant" && !next.parts.some((part) => part.type === "text" && part.text) ? next.id : undefined;
    const userStored = at >= 0 && (next === undefined || next.role === "user" || replaces !== undefined);
    await this.session.enqueueTurn({ requestId, kind: "chat", userText: checkpoint.user_text, userStored, chat: collector, delivery: checkpoint.id, replaces });
    await streaming;
    await this.postOnce(checkpoint, replyFor(collector, this.session.config.messenger_post_limit_chars ?? SOFT_LIMIT_CHARS));
  }

  /** Deliveries a dead predecessor left unfinished. */
  async restore() {
    const open = Object.values(this.host.store.state.deliveries).filter((delivery) => delivery.stage !== "completed");
    for (const checkpoint of open) {
      if (checkpoint.stage === "accepted") await this.answer(checkpoint, true);
      else await this.postOnce(checkpoint, [INTERRUPTED]);
    }
  }

  async postOnce(checkpoint, posts) {
    await this.postAll(checkpoint.id, posts);
    // A refused record leaves the delivery for a restart to settle; the
    // reply has gone out.
    await this.checkpoint(checkpoint, "completed").catch((refused) => this.host.log(refused.message));
  }

  /**
   * Posts in order, each once the surface has answered the one before. A
   * post the surface refuses ends the reply; unless it was the apology or
   * the error reply, the error reply follows (as the reference's delivery
   * posts it when a post throws). Nothing is checkpointed between posts,
   * as in Think: a crash mid-reply leaves the delivery `streaming`, and
   * the restarted process apologises.
   */
  async postAll(delivery, posts) {
    for (const text of posts) {
      try {
        await this.host.post(delivery, text);
      } catch (error) {
        this.host.log("post refused:", error.message);
        if (text !== INTERRUPTED && text !== ERROR) await this.postAll(delivery, [ERROR]);
        return;
      }
    }
  }

  checkpoint(checkpoint, stage) {
    return this.session.commit([Write.putDelivery({ id: checkpoint.id, user_text: checkpoint.user_text, stage })]);
  }
}

/** The post for how the turn ended: the apology, the error reply, or the text (split at the soft limit). */
function replyFor(collector, limit) {
  if (collector.outcome === "interrupted") return [INTERRUPTED];
  if (collector.outcome === "error") return [ERROR];
  if (collector.outcome === null) return [collector.text ? INTERRUPTED : ERROR];
  if (!collector.text) return [EMPTY];
  return split(collector.text, limit);
}

function split(text, limit) {
  const posts = [];
  let rest = text;
  while (rest.length > limit) {
    const cut = rest.lastIndexOf(" ", limit - 1);
    const at = cut >= 0 ? cut + 1 : limit;
    posts.push(rest.slice(0, at));
    rest = rest.slice(at);
  }
  posts.push(rest);
  return posts;
}

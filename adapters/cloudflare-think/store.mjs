// What Think persisted, read from the Durable Object's SQLite file: the
// transcript (the active branch of agents' session tree, as Think reads it
// back) and agents' recovery records.
//
// Why the file and not the transcript frame (`cf_agent_chat_messages`):
// the frame is sent only to a connection, on connect and at a turn's end,
// and a connection is an input to Think (it is offered a resume, it keeps
// the object awake, it wakes a killed one early): reading the store that
// way would change what is judged. The file is what survives a SIGKILL,
// can be read at any rest, with workerd running or dead, and touches
// nothing of Think's. It is the one `<hash>.sqlite` beside
// `metadata.sqlite` in the namespace's directory: real SQLite in WAL mode,
// read-only here.
//
// Node 20 has no SQLite of its own, so the read is Python's `sqlite3`
// module (python3 is on every machine here), one short process per read.
// agents' key-value rows are V8-serialized values (`_cf_KV`), which
// `node:v8` reads.
//
// The active branch is Think's (agents' `SessionsCore`): the newest row
// (max `seq`) is the leaf, its `parent_id`s lead to the root, and a row
// longer than one SQLite value continues in `cf_agents_session_message_chunks`.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import v8 from "node:v8";
import { fromUIMessage } from "../node/messages.mjs";

const READ_SCRIPT = `
import base64, json, sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
tables = {name for (name,) in db.execute("select name from sqlite_master where type = 'table'")}
messages = []
if "cf_agents_session_messages" in tables:
    rows = db.execute("""
      with recursive path(id, parent_id, depth) as (
        select id, parent_id, 0 from cf_agents_session_messages
          where session_id = '' and seq = (select max(seq) from cf_agents_session_messages where session_id = '')
        union all
        select m.id, m.parent_id, path.depth + 1 from cf_agents_session_messages m
          join path on m.id = path.parent_id and m.session_id = '')
      select m.id, m.content, m.content_chunks from path join cf_agents_session_messages m
        on m.id = path.id and m.session_id = '' order by path.depth desc""").fetchall()
    for (id, content, chunks) in rows:
        if chunks:
            content += "".join(c for (c,) in db.execute(
              "select content from cf_agents_session_message_chunks where session_id = '' and id = ? order by idx", (id,)))
        messages.append(content)
records = {}
if "_cf_KV" in tables:
    for (key, value) in db.execute("select key, value from _cf_KV where key like 'cf:chat%'"):
        records[key] = base64.b64encode(value).decode()
live = db.execute("select tag from cf_agents_streams where state = 'streaming' order by created_at desc").fetchall() if "cf_agents_streams" in tables else []
print(json.dumps({"messages": messages, "records": records, "streaming": len(live) > 0, "streamingRequest": live[0][0] if live else None}))
`;

/** The Durable Object's SQLite file under a run's state directory, or null before Think made one. */
export function findDatabase(stateDir) {
  for (const namespace of fs.readdirSync(stateDir, { withFileTypes: true })) {
    if (!namespace.isDirectory()) continue;
    const dir = path.join(stateDir, namespace.name);
    const file = fs.readdirSync(dir).find((name) => name.endsWith(".sqlite") && name !== "metadata.sqlite");
    if (file) return path.join(dir, file);
  }
  return null;
}

/**
 * The transcript as the store's `Message`s (engine/src/transcript.rs) and
 * agents' chat records (`cf:chat-recovery:incident:*`, `cf:chat:recovering`,
 * ...) by key, whether a stream is stored still `streaming` (a turn a
 * dead process left, which Think recovers when it wakes), and the request
 * the newest such stream belongs to (its tag); empty before Think stored
 * anything. `uiMessages` are the same messages as Think stored them (AI
 * SDK `UIMessage`s), for what the store's form does not keep (a part's type).
 */
export function readStore(stateDir) {
  const database = fs.existsSync(stateDir) ? findDatabase(stateDir) : null;
  if (!database) return { messages: [], uiMessages: [], records: {}, streaming: false, streamingRequest: null };
  const output = execFileSync("python3", ["-c", READ_SCRIPT, database], { encoding: "utf8", timeout: 10_000 });
  const read = JSON.parse(output);
  return {
    messages: read.messages.map((content) => fromUIMessage(JSON.parse(content))),
    uiMessages: read.messages.map((content) => JSON.parse(content)),
    records: Object.fromEntries(Object.entries(read.records).map(([key, value]) => [key, deserialize(value)])),
    streaming: read.streaming,
    streamingRequest: read.streamingRequest
  };
}

function deserialize(base64) {
  try {
    return v8.deserialize(Buffer.from(base64, "base64"));
  } catch {
    return null; // a value agents wrote in a form V8 does not read back
  }
}

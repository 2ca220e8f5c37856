// opencode under turnsim: `--engine-cmd "node adapters/opencode/engine.mjs"`
// runs each scenario against opencode's real server, in real time, through
// the live bridge (`adapters/live/`). README.md beside this file says how.

import { runBridge } from "../live/index.mjs";
import { OpencodeDriver } from "./driver.mjs";

runBridge((bridge) => new OpencodeDriver(bridge));

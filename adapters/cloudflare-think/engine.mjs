// Think under turnsim: `--engine-cmd "node adapters/cloudflare-think/engine.mjs"`
// runs each scenario against @cloudflare/think 0.23.0 in workerd, in real
// time, through the live bridge (`adapters/live/`). README.md says how.
import { runBridge } from "../live/index.mjs";
import { ThinkDriver } from "./driver.mjs";

runBridge((bridge) => new ThinkDriver(bridge));

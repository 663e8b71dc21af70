// What the conformance drivers share: reading the suite's results.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

/** Every check of every checks.json under `dir`, as one list. */
export const checksUnder = (dir) => {
  const checks = [];
  const walk = (d) => {
    for (const f of readdirSync(d)) {
      const p = join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else if (f === "checks.json") checks.push(...JSON.parse(readFileSync(p, "utf8")));
    }
  };
  walk(dir);
  return checks;
};

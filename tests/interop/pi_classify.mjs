// Asks pi's own classifier what it makes of error texts, for tests/interop/test_pi_classifiers.py.
// Usage:
//   node pi_classify.mjs PI_PACKAGE < cases.json
// PI_PACKAGE is an installed pi-coding-agent (0.73.1 or 1.6.0); cases.json is a JSON array of
// {stopReason, errorMessage, provider, usage: {input, output, cacheRead}, contextWindow}.
// Prints one JSON object:
//   {version, tables: {...pi's pattern lists, read from its own files...}, decisions: [...]}
// where each decision is "retry" (AgentSession._isRetryableError says so), else "overflow"
// (isContextOverflow says so), else "none" -- the order pi's agent_end handling asks them.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";

const [pkg] = process.argv.slice(2);
const manifest = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"));
const scope = dirname(manifest.name); // "@mariozechner" or "@earendil-works"
const nested = join(pkg, "node_modules", scope, "pi-ai");
const piAi = existsSync(nested) ? nested : join(pkg, "..", "pi-ai");
const load = (path) => import(pathToFileURL(path).href);

const { AgentSession } = await load(join(pkg, "dist", "core", "agent-session.js"));
const overflowPath = join(piAi, "dist", "utils", "overflow.js");
const { isContextOverflow, getOverflowPatterns } = await load(overflowPath);
const overflowSource = readFileSync(overflowPath, "utf8");

// A constant of a pi source file, evaluated from its own text (pi exports few of them).
function constant(source, name, shape) {
  const match = source.match(shape);
  if (!match) throw new Error(`${name} not found`);
  return new Function(`return ${match[1]};`)();
}
const regexes = (list) => list.map((r) => ({ source: r.source, flags: r.flags }));

const tables = {
  overflow: regexes(getOverflowPatterns()),
  notOverflow: regexes(
    constant(overflowSource, "NON_OVERFLOW_PATTERNS", /const NON_OVERFLOW_PATTERNS = (\[[\s\S]*?\]);/),
  ),
};
const version = manifest.version;
let isRetryable;
if (scope === "@earendil-works") {
  const retrySource = readFileSync(join(piAi, "dist", "utils", "retry.js"), "utf8");
  const list = (name) =>
    constant(retrySource, name, new RegExp(`const ${name} = buildProviderErrorPattern\\((\\[[\\s\\S]*?\\])\\);`));
  tables.retryable = list("RETRYABLE_PROVIDER_ERROR_PATTERN");
  tables.neverRetry = list("NON_RETRYABLE_PROVIDER_LIMIT_ERROR_PATTERN");
  tables.bodyless = regexes([
    constant(overflowSource, "CEREBRAS_BODYLESS_OVERFLOW_PATTERN", /const CEREBRAS_BODYLESS_OVERFLOW_PATTERN = (\/.*\/[a-z]*);/),
  ])[0];
  isRetryable = (message, contextWindow) =>
    AgentSession.prototype._isRetryableError.call(
      { model: undefined, _modelForMessage: () => ({ contextWindow }) },
      message,
    );
} else {
  const method = AgentSession.prototype._isRetryableError.toString();
  const literal = constant(method, "_isRetryableError's pattern", /return (\/.*\/[a-z]*)\.test\(err\);/);
  tables.retryable = literal.source.split("|");
  tables.retryableFlags = literal.flags;
  isRetryable = (message, contextWindow) =>
    AgentSession.prototype._isRetryableError.call({ model: { contextWindow } }, message);
}

const cases = JSON.parse(readFileSync(0, "utf8"));
const decisions = cases.map((c) => {
  const message = {
    role: "assistant",
    content: [],
    api: "openai-completions",
    provider: c.provider,
    model: "m",
    stopReason: c.stopReason,
    errorMessage: c.errorMessage ?? undefined,
    usage: {
      input: c.usage.input,
      output: c.usage.output,
      cacheRead: c.usage.cacheRead,
      cacheWrite: 0,
      totalTokens: c.usage.input + c.usage.output + c.usage.cacheRead,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
    },
    timestamp: 0,
  };
  const window = c.contextWindow ?? 0;
  if (isRetryable(message, window)) return "retry";
  return isContextOverflow(message, window) ? "overflow" : "none";
});
process.stdout.write(JSON.stringify({ version, tables, decisions }));

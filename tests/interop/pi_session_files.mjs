// Drives pi's own SessionManager (from the installed @mariozechner/pi-coding-agent) for
// tests/interop/test_pi_files.py. Usage:
//   node pi_session_files.mjs PI_PACKAGE read FILE
//       open FILE as pi does and print what pi makes of it
//   node pi_session_files.mjs PI_PACKAGE write DIR
//       write a new session in DIR with every entry type (a branch included) and print it
//   node pi_session_files.mjs PI_PACKAGE read-many FILE...
//       open each FILE; print a JSON array of what pi makes of each
//   node pi_session_files.mjs PI_PACKAGE append-custom FILE
//       open FILE, append a custom entry (appendCustomEntry) and a custom_message entry
//       (appendCustomMessageEntry) at its leaf, and print what pi then makes of it
// Prints one JSON object: {file, context: buildSessionContext(), sessionName, leafId,
// entries: getEntries(), branch: getBranch()}.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [pkg, mode, ...targets] = process.argv.slice(2);
const target = targets[0];
const { SessionManager } = await import(
  pathToFileURL(join(pkg, "dist", "core", "session-manager.js")).href
);

const PIXEL =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

function usage(input, output) {
  return {
    input,
    output,
    cacheRead: 1,
    cacheWrite: 2,
    totalTokens: input + output + 3,
    cost: { input: 0.5, output: 0.25, cacheRead: 0.125, cacheWrite: 0.0625, total: 0.9375 },
  };
}

function assistant(content, timestamp, extra = {}) {
  return {
    role: "assistant",
    content,
    api: "anthropic-messages",
    provider: "anthropic",
    model: "claude-sonnet-4-5",
    usage: usage(100, 20),
    stopReason: "stop",
    timestamp,
    ...extra,
  };
}

function write(dir) {
  const sm = SessionManager.create("/src/app", dir);
  const first = sm.appendMessage({ role: "user", content: "Hello", timestamp: 1000 });
  sm.appendMessage(assistant([{ type: "text", text: "Hi!" }], 2000, { responseId: "msg_1" }));
  sm.appendModelChange("openai", "gpt-4o");
  sm.appendThinkingLevelChange("high");
  sm.appendMessage({
    role: "user",
    content: [
      { type: "text", text: "What is in this image?" },
      { type: "image", data: PIXEL, mimeType: "image/png" },
    ],
    timestamp: 3000,
  });
  sm.appendMessage(
    assistant(
      [
        { type: "thinking", thinking: "Let me look.", thinkingSignature: "sig-1" },
        { type: "toolCall", id: "call_1", name: "read", arguments: { path: "a.png" } },
      ],
      4000,
      { stopReason: "toolUse" },
    ),
  );
  sm.appendMessage({
    role: "toolResult",
    toolCallId: "call_1",
    toolName: "read",
    content: [{ type: "text", text: "a red pixel" }],
    details: { bytes: 68 },
    isError: false,
    timestamp: 5000,
  });
  sm.appendMessage({
    role: "bashExecution",
    command: "ls",
    output: "a.png\n",
    exitCode: 0,
    cancelled: false,
    truncated: false,
    timestamp: 6000,
  });
  const kept = sm.appendMessage({ role: "user", content: "Summarize.", timestamp: 7000 });
  sm.appendMessage(
    assistant([{ type: "text", text: "" }], 8000, {
      stopReason: "error",
      errorMessage: "503 Service Unavailable",
    }),
  );
  sm.appendMessage(assistant([{ type: "text", text: "A red pixel." }], 9000));
  sm.appendCompaction("Greeting and an image.", kept, 12345, { readFiles: ["a.png"] }, false);
  sm.appendCustomEntry("my-extension", { count: 42 });
  sm.appendCustomMessageEntry("my-extension", "Injected context", true, { source: "x" });
  sm.appendLabelChange(first, "start");
  const named = sm.appendSessionInfo("  Image work  ");
  sm.appendMessage({ role: "user", content: "Abandoned question", timestamp: 10000 });
  sm.appendMessage(assistant([{ type: "text", text: "Abandoned answer" }], 11000));
  sm.branchWithSummary(named, "Tried another question.", { readFiles: [] }, false);
  sm.appendMessage({ role: "user", content: "Back on the branch", timestamp: 12000 });
  sm.appendMessage(assistant([{ type: "text", text: "Yes." }], 13000));
  return sm;
}

function describe(sm) {
  return {
    file: sm.getSessionFile(),
    context: sm.buildSessionContext(),
    sessionName: sm.getSessionName() ?? null,
    leafId: sm.getLeafId(),
    entries: sm.getEntries(),
    branch: sm.getBranch(),
  };
}

function appendCustom(file) {
  const sm = SessionManager.open(file, undefined);
  sm.appendCustomEntry("interop-test", { count: 42, nested: { ok: true } });
  sm.appendCustomMessageEntry("interop-test", "Injected context", true, { source: "pi" });
  return sm;
}

if (mode === "read-many") {
  process.stdout.write(JSON.stringify(targets.map((t) => describe(SessionManager.open(t)))));
} else {
  const open = { write, "append-custom": appendCustom }[mode];
  const sm = open ? open(target) : SessionManager.open(target, undefined);
  process.stdout.write(JSON.stringify(describe(sm)));
}

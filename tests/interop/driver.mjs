// The interop scenario: pi's own RpcClient, unchanged, calls every one of its methods
// against one agent process and records what each call returned or threw.
//
//   node driver.mjs CONFIG.json        (CONFIG: see tests/interop/conftest.py, run_driver)
//
// RpcClient is imported by absolute path from the installed pi package (its "exports"
// block does not expose dist/modes/rpc/rpc-client.js). The agent is `node cliPath
// --mode rpc ...args`: pi's dist/cli.js, or shim.mjs, which starts trio-session.
//
// Output (stdout, one JSON document): {"steps": [...], "stderr": "..."}; each step is
// {step, method, args, outcome: "returned"|"threw", value | error, events, responses}:
// the events the client's listeners saw and the raw response lines that arrived while
// the step ran. A step never waits on time: it waits for an event, with a timeout
// that only turns a hang into a recorded failure.

import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const { RpcClient } = await import(
	pathToFileURL(path.join(config.piPackage, "dist", "modes", "rpc", "rpc-client.js")).href
);

const STEP_TIMEOUT_MS = config.stepTimeoutMs ?? 20000;
const steps = [];
let current = null;
const waiters = new Set();

function tag(name, text) {
	return `[interop:${name}] ${text}`;
}

// Every event goes through one listener, registered before any other: it records the
// event into the running step and wakes the driver's own waiters. (RpcClient's
// dispatch loop skips the listener after one that unsubscribes during the dispatch, so
// the driver never subscribes and unsubscribes listeners of its own per wait.)
function dispatch(event) {
	if (current) current.events.push(event);
	for (const waiter of [...waiters]) waiter(event);
}

// Wait for the first event (from now on) that satisfies `predicate`.
function nextEvent(predicate, what) {
	return new Promise((resolve, reject) => {
		const waiter = (event) => {
			if (predicate(event)) {
				clearTimeout(timer);
				waiters.delete(waiter);
				resolve(event);
			}
		};
		const timer = setTimeout(() => {
			waiters.delete(waiter);
			reject(new Error(`driver: no ${what} within ${STEP_TIMEOUT_MS} ms`));
		}, STEP_TIMEOUT_MS);
		waiters.add(waiter);
	});
}

function withTimeout(promise, what) {
	let timer;
	const timeout = new Promise((_, reject) => {
		timer = setTimeout(() => reject(new Error(`driver: ${what} took over ${STEP_TIMEOUT_MS} ms`)), STEP_TIMEOUT_MS);
	});
	return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Run one step: `body` makes the calls; what it returns (or throws) is the step's outcome.
async function step(name, method, args, body) {
	current = { step: name, method, args, events: [], responses: [] };
	try {
		const value = await withTimeout(body(), name);
		current.outcome = "returned";
		current.value = value === undefined ? "<undefined>" : value;
	} catch (error) {
		current.outcome = "threw";
		current.error = error instanceof Error ? error.message : String(error);
	}
	steps.push(current);
	current = null;
	return steps[steps.length - 1];
}

function tapResponses(client) {
	// A second reader of the agent's stdout, beside the client's own: it only looks.
	let buffer = "";
	client.process.stdout.on("data", (data) => {
		buffer += data.toString();
		let newline = buffer.indexOf("\n");
		while (newline !== -1) {
			const line = buffer.slice(0, newline).replace(/\r$/, "");
			buffer = buffer.slice(newline + 1);
			newline = buffer.indexOf("\n");
			try {
				const record = JSON.parse(line);
				if (record.type === "response" && current) current.responses.push(record);
			} catch {
				// not JSON: the client ignores it too
			}
		}
	});
}

async function release() {
	await fetch(`${config.controlUrl}/control/release`, { method: "POST", body: "{}" });
}

// After a prompt whose run may take several agent_end events (retries, queued
// messages): wait until the agent reports itself idle, asking again after each
// agent_end — or after a short pause, because the last agent_end may already have
// come (a retry chain ended by abortRetry ends its prompt without another one, and
// the prompt is still finishing, writing its session file, when get_state arrives).
async function settle(client) {
	for (let i = 0; i < 200; i++) {
		const ended = nextEvent((e) => e.type === "agent_end", "agent_end");
		ended.catch(() => undefined);
		const state = await client.getState();
		if (!state.isStreaming) return;
		await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 50))]);
	}
	throw new Error("driver: the agent never became idle");
}

async function main() {
	const client = new RpcClient({ cliPath: config.cliPath, cwd: config.cwd, env: config.env, args: config.args });
	client.onEvent(dispatch);
	await client.start();
	tapResponses(client);

	const initial = await step("getState.initial", "getState", [], () => client.getState());
	await step("getAvailableModels", "getAvailableModels", [], () => client.getAvailableModels());
	await step("getCommands", "getCommands", [], () => client.getCommands());
	await step("getLastAssistantText.empty", "getLastAssistantText", [], () => client.getLastAssistantText());
	await step("getMessages.empty", "getMessages", [], () => client.getMessages());

	await step("promptAndWait", "promptAndWait", [tag("hello", "Say hello.")], () =>
		client.promptAndWait(tag("hello", "Say hello."), undefined, STEP_TIMEOUT_MS),
	);
	await step("getMessages", "getMessages", [], () => client.getMessages());
	await step("getLastAssistantText", "getLastAssistantText", [], () => client.getLastAssistantText());
	await step("getSessionStats", "getSessionStats", [], () => client.getSessionStats());
	await step("getForkMessages", "getForkMessages", [], () => client.getForkMessages());

	await step("setSessionName", "setSessionName", ["interop session"], () => client.setSessionName("interop session"));
	await step("getState.named", "getState", [], () => client.getState());

	await step("setModel", "setModel", [config.provider, config.models[1]], () =>
		client.setModel(config.provider, config.models[1]),
	);
	await step("setModel.unknown", "setModel", [config.provider, "no-such-model"], () =>
		client.setModel(config.provider, "no-such-model"),
	);
	await step("cycleModel", "cycleModel", [], () => client.cycleModel());
	await step("setThinkingLevel", "setThinkingLevel", ["high"], () => client.setThinkingLevel("high"));
	await step("cycleThinkingLevel", "cycleThinkingLevel", [], () => client.cycleThinkingLevel());
	await step("setSteeringMode", "setSteeringMode", ["all"], () => client.setSteeringMode("all"));
	await step("setFollowUpMode", "setFollowUpMode", ["all"], () => client.setFollowUpMode("all"));
	await step("setAutoCompaction", "setAutoCompaction", [false], () => client.setAutoCompaction(false));
	await step("setAutoRetry", "setAutoRetry", [true], () => client.setAutoRetry(true));
	await step("getState.configured", "getState", [], () => client.getState());

	await step("bash", "bash", ["printf 'interop\\n'"], () => client.bash("printf 'interop\\n'"));
	await step("abortBash", "abortBash", [], () => client.abortBash());

	// A prompt whose first attempt fails with a 503; during the backoff, a plain prompt,
	// then one with streamingBehavior "steer". The plain prompt's reply is held at the
	// server until the steer has been answered: the run it starts is still on when the
	// steer comes, as a user's would be. (Unheld, the reply could be over first — pi then
	// runs the steer as a new prompt — and which comes first is the two processes'
	// timing, not a behaviour to compare.)
	const plainStreaming = nextEvent((e) => e.type === "message_update", "message_update");
	plainStreaming.catch(() => undefined);
	const retryEnded = nextEvent((e) => e.type === "auto_retry_end", "auto_retry_end");
	retryEnded.catch(() => undefined);
	await step("prompt.retry", "prompt", [tag("retry", "Try again.")], async () => {
		const retrying = nextEvent((e) => e.type === "auto_retry_start", "auto_retry_start");
		await client.prompt(tag("retry", "Try again."));
		return await retrying;
	});
	await step("prompt.duringBackoff", "prompt", [tag("gate-backoff-plain", "And this?")], () =>
		client.prompt(tag("gate-backoff-plain", "And this?")),
	);
	await step("send.promptDuringBackoff.steer", "send", [{ type: "prompt", streamingBehavior: "steer" }], () =>
		client.send({ type: "prompt", message: tag("backoff-steer", "Also this."), streamingBehavior: "steer" }),
	);
	await step("waitForIdle.afterRetry", "waitForIdle", [], async () => {
		await plainStreaming; // the held reply has begun
		await release();
		await retryEnded;
		await settle(client);
	});

	// A retry chain cancelled in its backoff.
	await step("abortRetry", "abortRetry", [], async () => {
		const retrying = nextEvent((e) => e.type === "auto_retry_start", "auto_retry_start");
		const ended = nextEvent((e) => e.type === "auto_retry_end", "auto_retry_end");
		ended.catch(() => undefined);
		await client.prompt(tag("retry-abort", "Fail first."));
		await retrying;
		await client.abortRetry();
		await ended;
		await settle(client);
	});

	// steer and followUp while a reply is streaming (the server holds it open).
	await step("collectEvents.steerFollowUp", "collectEvents", [], async () => {
		const streaming = nextEvent((e) => e.type === "message_update", "message_update");
		const events = client.collectEvents(STEP_TIMEOUT_MS);
		await client.prompt(tag("gate", "Take your time."));
		await streaming;
		await client.steer(tag("steered", "Change course."));
		await client.followUp(tag("followed", "Then this."));
		await release();
		await events;
		await settle(client);
		return (await client.getMessages()).length;
	});
	// abort while a reply is streaming.
	await step("abort", "abort", [], async () => {
		const streaming = nextEvent((e) => e.type === "message_update", "message_update");
		const idle = client.waitForIdle(STEP_TIMEOUT_MS);
		await client.prompt(tag("gate-abort", "Never finish."));
		await streaming;
		await client.abort();
		await idle;
	});
	await step("waitForIdle", "waitForIdle", [], async () => {
		const idle = client.waitForIdle(STEP_TIMEOUT_MS);
		await client.prompt(tag("idle", "Quick one."));
		await idle;
	});

	await step("compact", "compact", ["Keep it short."], () => client.compact("Keep it short."));
	await step("setAutoCompaction.on", "setAutoCompaction", [true], () => client.setAutoCompaction(true));
	await step("getSessionStats.end", "getSessionStats", [], () => client.getSessionStats());
	await step("exportHtml", "exportHtml", ["<work>/export.html"], () =>
		client.exportHtml(path.join(config.workDir, "export.html")),
	);

	await step("clone", "clone", [], () => client.clone());
	const cloned = await step("getForkMessages.cloned", "getForkMessages", [], () => client.getForkMessages());
	const forkEntry = cloned.outcome === "returned" && cloned.value.length ? cloned.value[0].entryId : "no-entry";
	await step("fork", "fork", ["<first fork entry>"], () => client.fork(forkEntry));
	await step("getState.forked", "getState", [], () => client.getState());
	const original =
		initial.outcome === "returned" && initial.value.sessionFile
			? initial.value.sessionFile
			: path.join(config.workDir, "missing-session.jsonl");
	await step("switchSession", "switchSession", ["<first session file>"], () => client.switchSession(original));
	await step("getMessages.switched", "getMessages", [], () => client.getMessages());
	await step("steer.idle", "steer", [tag("steer-idle", "x")], () => client.steer(tag("steer-idle", "Idle steer.")));
	await step("followUp.idle", "followUp", [tag("follow-idle", "x")], () =>
		client.followUp(tag("follow-idle", "Idle follow-up.")),
	);
	await step("getState.afterQueues", "getState", [], () => client.getState());

	await step("newSession", "newSession", [], () => client.newSession());
	await step("getState.final", "getState", [], () => client.getState());

	const stderr = client.getStderr();
	await client.stop();
	return stderr;
}

// The agent process as the OS sees it: pi's cli.js is the client's child itself; the
// shim's child is the Python process that does the work (the shim exits with it).
function agentPid(client) {
	const pid = client.process.pid;
	try {
		const children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/);
		return children[0] ? Number(children[0]) : pid;
	} catch {
		return pid;
	}
}

// The agent is killed (SIGKILL) while a reply streams: what do the waiting calls do?
async function killScenario() {
	const client = new RpcClient({ cliPath: config.cliPath, cwd: config.cwd, env: config.env, args: config.args });
	client.onEvent(dispatch);
	await client.start();
	tapResponses(client);
	const waitMs = config.killWaitMs;
	await step("prompt.gate", "prompt", [tag("gate-kill", "x")], async () => {
		const streaming = nextEvent((e) => e.type === "message_update", "message_update");
		await client.prompt(tag("gate-kill", "Then die."));
		await streaming;
	});
	const exited = new Promise((resolve) => client.process.once("exit", (code, signal) => resolve({ code, signal })));
	const idle = client.waitForIdle(waitMs);
	const collected = client.collectEvents(waitMs);
	await step("kill", "kill", [], async () => {
		process.kill(agentPid(client), "SIGKILL");
		await exited;
		return client.process.exitCode !== null || client.process.signalCode !== null;
	});
	await step("waitForIdle.afterKill", "waitForIdle", [waitMs], () => idle);
	await step("collectEvents.afterKill", "collectEvents", [waitMs], () => collected);
	const stderr = client.getStderr();
	await client.stop();
	return stderr;
}

// A waiter whose step already failed may still reject later: that is recorded by the
// step, not a reason to crash the driver.
process.on("unhandledRejection", () => undefined);

let stderr = "";
let fatal = null;
try {
	stderr = await (config.scenario === "kill" ? killScenario() : main());
} catch (error) {
	fatal = error instanceof Error ? error.stack : String(error);
}
// Exit once the (possibly large) document is flushed to the pipe, not before.
process.stdout.write(`${JSON.stringify({ steps, stderr, fatal })}\n`, () => process.exit(0));

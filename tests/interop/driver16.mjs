// The interop scenario for today's pi (1.6.0): pi 1.6.0's own RpcClient, unchanged, calls
// every one of its methods against one agent process and records what each call returned
// or threw. driver.mjs is the same for pi 0.73.1; this one adds what 1.6.0's client has
// (prompt dispositions, agent_settled, clear_queue, thinking levels, entries, tree) and
// records how the agent exits on the client's SIGTERM.
//
//   <node 22> driver16.mjs CONFIG.json        (CONFIG: see tests/interop/conftest.py)
//
// RpcClient is imported by absolute path from the installed package. It starts its agent
// as `node cliPath --mode rpc ...args` with `node` from PATH: the config's env puts node
// 22's directory first. The agent is pi's dist/cli.js, or shim.mjs, which starts
// trio-session.
//
// Output (stdout, one JSON document): {"steps": [...], "stderr": "...", "fatal": ...};
// each step is {step, method, args, outcome: "returned"|"threw", value | error, events,
// responses}. A step never waits on time: it waits for an event or an answer, with a
// timeout that only turns a hang into a recorded failure.

import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const { RpcClient } = await import(
	pathToFileURL(path.join(config.piPackage, "dist", "modes", "rpc", "rpc-client.js")).href
);

const STEP_TIMEOUT_MS = config.stepTimeoutMs ?? 20000;
// What the client's own waiting calls (waitForIdle, collectEvents, promptAndWait) are
// given: they end on agent_settled, so against an agent that never sends one this is how
// long the call takes to throw.
const SETTLE_WAIT_MS = config.settleWaitMs ?? 8000;
const steps = [];
let current = null;
const waiters = new Set();

function tag(name, text) {
	return `[interop:${name}] ${text}`;
}

// Every event goes through this one listener (registered first): it records the event
// into the running step and wakes the driver's own waiters.
function dispatch(event) {
	if (current) current.events.push(event);
	for (const waiter of [...waiters]) waiter(event);
}

function nextEvent(predicate, what) {
	const promise = new Promise((resolve, reject) => {
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
	promise.catch(() => undefined);
	return promise;
}

function withTimeout(promise, what) {
	let timer;
	const timeout = new Promise((_, reject) => {
		timer = setTimeout(() => reject(new Error(`driver: ${what} took over ${STEP_TIMEOUT_MS} ms`)), STEP_TIMEOUT_MS);
	});
	return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

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

// Wait until the agent reports itself idle (get_state), asking again after each
// agent_end / agent_settled or a short pause. The driver's own way to a quiet agent, so a
// missing agent_settled fails the step that relied on it and not every later one.
async function settle(client) {
	for (let i = 0; i < 400; i++) {
		const ended = nextEvent((e) => e.type === "agent_end" || e.type === "agent_settled", "agent_end");
		const state = await client.getState();
		if (!state.isStreaming && !state.isCompacting) return;
		await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 50))]);
	}
	throw new Error("driver: the agent never became idle");
}

// A call whose promise may throw (a missing disposition): the run it started goes on, so
// the step still waits for what it waits for; what the call did is the step's outcome.
async function settled(promise) {
	try {
		return { value: await promise };
	} catch (error) {
		return { error };
	}
}

function outcomeOf(result) {
	if (result.error) throw result.error;
	return result.value;
}

async function main() {
	const client = new RpcClient({ cliPath: config.cliPath, cwd: config.cwd, env: config.env, args: config.args });
	client.onEvent(dispatch);
	await client.start();
	tapResponses(client);

	const initial = await step("getState.initial", "getState", [], () => client.getState());
	await step("getAvailableModels", "getAvailableModels", [], () => client.getAvailableModels());
	await step("getAvailableThinkingLevels", "getAvailableThinkingLevels", [], () =>
		client.getAvailableThinkingLevels(),
	);
	await step("getCommands", "getCommands", [], () => client.getCommands());
	await step("getLastAssistantText.empty", "getLastAssistantText", [], () => client.getLastAssistantText());
	await step("getMessages.empty", "getMessages", [], () => client.getMessages());
	await step("getEntries.empty", "getEntries", [], () => client.getEntries());
	await step("getTree.empty", "getTree", [], () => client.getTree());
	await step("clearQueue.empty", "clearQueue", [], () => client.clearQueue());

	await step("promptAndWait", "promptAndWait", [tag("hello", "Say hello.")], async () => {
		const done = nextEvent((e) => e.type === "agent_end", "agent_end");
		try {
			return await client.promptAndWait(tag("hello", "Say hello."), undefined, SETTLE_WAIT_MS);
		} finally {
			await done.catch(() => undefined);
			await settle(client);
		}
	});
	await step("getMessages", "getMessages", [], () => client.getMessages());
	await step("getLastAssistantText", "getLastAssistantText", [], () => client.getLastAssistantText());
	await step("getSessionStats", "getSessionStats", [], () => client.getSessionStats());
	await step("getForkMessages", "getForkMessages", [], () => client.getForkMessages());
	const entries = await step("getEntries", "getEntries", [], () => client.getEntries());
	const firstEntry =
		entries.outcome === "returned" && entries.value.entries?.length ? entries.value.entries[0].id : "no-entry";
	await step("getEntries.since", "getEntries", ["<first entry>"], () => client.getEntries(firstEntry));
	await step("getEntries.sinceUnknown", "getEntries", ["no-such-entry"], () => client.getEntries("no-such-entry"));
	await step("getTree", "getTree", [], () => client.getTree());

	await step("setSessionName", "setSessionName", ["interop session"], () => client.setSessionName("interop session"));
	await step("getState.named", "getState", [], () => client.getState());

	await step("setModel", "setModel", [config.provider, config.models[1]], () =>
		client.setModel(config.provider, config.models[1]),
	);
	await step("setModel.unknown", "setModel", [config.provider, "no-such-model"], () =>
		client.setModel(config.provider, "no-such-model"),
	);
	await step("getAvailableThinkingLevels.reasoning", "getAvailableThinkingLevels", [], () =>
		client.getAvailableThinkingLevels(),
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
	// then one with streamingBehavior "steer" (see driver.mjs for why the plain prompt's
	// reply is held until the steer has been answered).
	const plainStreaming = nextEvent((e) => e.type === "message_update", "message_update");
	const retryEnded = nextEvent((e) => e.type === "auto_retry_end", "auto_retry_end");
	await step("prompt.retry", "prompt", [tag("retry", "Try again.")], async () => {
		const retrying = nextEvent((e) => e.type === "auto_retry_start", "auto_retry_start");
		// pi 1.6.0 then drops the failed attempt from later context: its context_edit entry
		// (ours too, under retry.profile pi-1.6) closes the step, wherever the lines split.
		const dropped = nextEvent(
			(e) => e.type === "entry_appended" && e.entry?.type === "context_edit",
			"entry_appended",
		);
		const disposition = await settled(client.prompt(tag("retry", "Try again.")));
		await retrying;
		await dropped;
		return outcomeOf(disposition);
	});
	await step("prompt.duringBackoff", "prompt", [tag("gate-backoff-plain", "And this?")], () =>
		client.prompt(tag("gate-backoff-plain", "And this?")),
	);
	await step("prompt.duringBackoff.steer", "prompt", [tag("backoff-steer", "x"), undefined, "steer"], () =>
		client.prompt(tag("backoff-steer", "Also this."), undefined, "steer"),
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
		await settled(client.prompt(tag("retry-abort", "Fail first.")));
		await retrying;
		await client.abortRetry();
		await ended;
		await settle(client);
	});

	// steer and followUp while a reply is streaming (the server holds it open); the
	// client's collectEvents ends on agent_settled.
	await step("collectEvents.steerFollowUp", "collectEvents", [], async () => {
		const streaming = nextEvent((e) => e.type === "message_update", "message_update");
		const events = settled(client.collectEvents(SETTLE_WAIT_MS));
		const dispositions = [];
		dispositions.push(await settled(client.prompt(tag("gate", "Take your time."))));
		await streaming;
		dispositions.push(await settled(client.steer(tag("steered", "Change course."))));
		dispositions.push(await settled(client.followUp(tag("followed", "Then this."))));
		await release();
		const collected = await events;
		await settle(client);
		for (const d of dispositions) outcomeOf(d);
		return { dispositions: dispositions.map((d) => d.value), events: outcomeOf(collected).length };
	});
	// clear_queue takes back what is queued while a reply streams.
	await step("clearQueue", "clearQueue", [], async () => {
		const streaming = nextEvent((e) => e.type === "message_update", "message_update");
		await settled(client.prompt(tag("gate-clear", "Hold on.")));
		await streaming;
		await settled(client.steer(tag("steer-cleared", "Never mind.")));
		await settled(client.followUp(tag("follow-cleared", "Nor this.")));
		const cleared = await settled(client.clearQueue());
		await release();
		await settle(client);
		return outcomeOf(cleared);
	});
	// abort while a reply is streaming.
	await step("abort", "abort", [], async () => {
		const streaming = nextEvent((e) => e.type === "message_update", "message_update");
		const idle = settled(client.waitForIdle(SETTLE_WAIT_MS));
		await settled(client.prompt(tag("gate-abort", "Never finish.")));
		await streaming;
		await client.abort();
		const waited = await idle;
		await settle(client);
		return outcomeOf(waited);
	});
	await step("waitForIdle", "waitForIdle", [], async () => {
		const idle = settled(client.waitForIdle(SETTLE_WAIT_MS));
		const disposition = await settled(client.prompt(tag("idle", "Quick one.")));
		const waited = await idle;
		await settle(client);
		outcomeOf(disposition);
		return outcomeOf(waited);
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
	await step("getTree.forked", "getTree", [], () => client.getTree());
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
	await step("clearQueue.idle", "clearQueue", [], () => client.clearQueue());

	await step("newSession", "newSession", [], () => client.newSession());
	await step("getState.final", "getState", [], () => client.getState());

	const stderr = client.getStderr();
	// stop() sends SIGTERM and waits for the exit: how did the agent exit?
	const exited = new Promise((resolve) => client.process.once("exit", (code, signal) => resolve({ code, signal })));
	await step("stop", "stop", [], async () => {
		await client.stop();
		return await exited;
	});
	return stderr;
}

process.on("unhandledRejection", () => undefined);

let stderr = "";
let fatal = null;
try {
	stderr = await main();
} catch (error) {
	fatal = error instanceof Error ? error.stack : String(error);
}
process.stdout.write(`${JSON.stringify({ steps, stderr, fatal })}\n`, () => process.exit(0));

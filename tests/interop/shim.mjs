// Stands where pi's dist/cli.js stands, for pi's RpcClient: `node shim.mjs --mode rpc
// ...args` starts `<python> -m trio_session rpc ...` with the same stdin, stdout and
// stderr, passes on the signals RpcClient.stop() sends, and exits as the child exits.
//
// The Python interpreter is $TRIO_SESSION_PYTHON (default: python3). The only place
// that maps pi's command line and config dir onto trio-session's is trioSessionArgs().

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

function option(args, name) {
	const index = args.indexOf(name);
	return index === -1 ? undefined : args[index + 1];
}

function readJson(file) {
	try {
		return JSON.parse(readFileSync(file, "utf8"));
	} catch {
		return undefined;
	}
}

// pi's arguments and environment -> trio-session's `rpc` arguments.
//
// Today trio-session has no reader for pi's config dir, so this reads
// $PI_CODING_AGENT_DIR/models.json and settings.json itself and passes what they say
// as flags: --provider openai --base-url URL --model ID --api-key-file FILE
// --context-window N --settings FILE. Once `trio-session rpc --agent-dir DIR` reads
// that dir as pi does, this becomes:
//   ["rpc", "--agent-dir", agentDir, "--provider", provider, "--model", modelId]
export function trioSessionArgs(piArgs, env) {
	const agentDir = env.PI_CODING_AGENT_DIR;
	const provider = option(piArgs, "--provider");
	const modelId = option(piArgs, "--model");
	const args = ["rpc"];
	const models = agentDir ? readJson(path.join(agentDir, "models.json")) : undefined;
	const config = models?.providers?.[provider];
	if (!config) {
		if (modelId) args.push("--model", modelId);
		return args;
	}
	const scratch = mkdtempSync(path.join(agentDir, ".trio-session-shim-"));
	const keyFile = path.join(scratch, "key");
	writeFileSync(keyFile, `${config.apiKey}\n`, { mode: 0o600 });
	args.push("--provider", "openai", "--base-url", config.baseUrl, "--api-key-file", keyFile);
	const model = config.models?.find((m) => m.id === modelId) ?? config.models?.[0];
	if (model) {
		args.push("--model", model.id);
		if (model.contextWindow) args.push("--context-window", String(model.contextWindow));
	}
	const settings = readJson(path.join(agentDir, "settings.json"));
	if (settings?.retry) {
		// trio-session rejects keys it does not know; pi's retry.provider.maxRetries
		// (the SDK's own retries) is one.
		const retry = { ...settings.retry };
		if (retry.provider) {
			const { maxRetries: _sdkRetries, ...providerRest } = retry.provider;
			retry.provider = providerRest;
		}
		const settingsFile = path.join(scratch, "settings.json");
		writeFileSync(settingsFile, JSON.stringify({ retry }));
		args.push("--settings", settingsFile);
	}
	return args;
}

const piArgs = process.argv.slice(2);
const python = process.env.TRIO_SESSION_PYTHON || "python3";
const child = spawn(python, ["-m", "trio_session", ...trioSessionArgs(piArgs, process.env)], {
	stdio: "inherit",
});
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) {
	process.on(signal, () => child.kill(signal));
}
child.on("exit", (code, signal) => {
	process.exit(code ?? (signal ? 128 : 1));
});
child.on("error", (error) => {
	process.stderr.write(`shim: cannot start ${python}: ${error.message}\n`);
	process.exit(127);
});

// Stands where pi's dist/cli.js stands, for pi's RpcClient: `node shim.mjs --mode rpc
// ...args` starts `<python> -m trio_session rpc ...` with the same stdin, stdout and
// stderr, passes on the signals RpcClient.stop() sends, and exits as the child exits.
//
// The Python interpreter is $TRIO_SESSION_PYTHON (default: python3). The only place
// that maps pi's command line and config dir onto trio-session's is trioSessionArgs().

import { spawn } from "node:child_process";
import { constants } from "node:os";

function option(args, name) {
	const index = args.indexOf(name);
	return index === -1 ? undefined : args[index + 1];
}

// pi's arguments and environment -> trio-session's `rpc` arguments.
export function trioSessionArgs(piArgs, env) {
	// trio-session reads pi's agent directory itself (--agent-dir, or PI_CODING_AGENT_DIR,
	// which the environment already carries): settings.json, models.json, auth.json.
	const args = ["rpc"];
	if (env.PI_CODING_AGENT_DIR) args.push("--agent-dir", env.PI_CODING_AGENT_DIR);
	const provider = option(piArgs, "--provider");
	const modelId = option(piArgs, "--model");
	if (provider) args.push("--provider", provider);
	if (modelId) args.push("--model", modelId);
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
// A child ended by a signal: exit as a shell reports it, 128 + the signal's number.
child.on("exit", (code, signal) => {
	process.exit(code ?? (signal ? 128 + (constants.signals[signal] ?? 0) : 1));
});
child.on("error", (error) => {
	process.stderr.write(`shim: cannot start ${python}: ${error.message}\n`);
	process.exit(127);
});

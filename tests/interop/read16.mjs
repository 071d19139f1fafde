// pi 1.6.0's read tool, as its package builds it, on the paths given: prints
// {path: {content, details}} as JSON. Run by test_read_images16.py.
const [, , pkg, cwd, ...paths] = process.argv;
const { createReadTool } = await import(`${pkg}/dist/core/tools/read.js`);
const tool = createReadTool(cwd);
const out = {};
for (const path of paths) {
	const result = await tool.execute("call", { path });
	out[path] = { content: result.content, details: result.details ?? null };
}
console.log(JSON.stringify(out));

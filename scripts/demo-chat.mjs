// Part of demo.sh: waits until the frontend at argv[2] lists model argv[3], sends one chat
// completion, and prints the answer and the commands to try next.
const [base, model] = process.argv.slice(2);
const started = Date.now();

for (;;) {
  const models = await fetch(`${base}/v1/models`).then((r) => r.json(), () => undefined);
  if (models?.data?.some((m) => m.id === model)) break;
  if (Date.now() - started > 120_000) {
    console.error(`demo: ${model} did not appear at ${base}/v1/models within 120 s`);
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 200));
}

const body = { model, messages: [{ role: 'user', content: 'Hello! Who are you?' }], max_tokens: 24 };
const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const answer = await res.json();
if (!res.ok) {
  console.error(`demo: the chat completion failed (${res.status}): ${JSON.stringify(answer)}`);
  process.exit(1);
}
const choice = answer.choices[0];
console.log(`\ndemo: answered in ${((Date.now() - started) / 1000).toFixed(1)} s (finish_reason ${choice.finish_reason}, ${answer.usage.completion_tokens} tokens):`);
console.log(JSON.stringify(choice.message.content));
console.log(`\nTry next:\n  curl -s ${base}/v1/chat/completions -H 'content-type: application/json' \\\n    -d '${JSON.stringify({ ...body, messages: [{ role: 'user', content: 'Tell me a story' }] })}'\n`);

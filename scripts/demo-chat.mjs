// Part of demo.sh: waits until the frontend at BASE lists MODEL, then asks it QUESTION (after the
// SYSTEM prompt, if given) at temperature 0 and prints the answer and a curl line to try next.
// With --wait-only it only waits, and says the model is served.
//   node scripts/demo-chat.mjs BASE MODEL (QUESTION [SYSTEM] | --wait-only)
const [base, model, question, system] = process.argv.slice(2);
const started = Date.now();

for (;;) {
  const models = await fetch(`${base}/v1/models`).then(
    (r) => r.json(),
    () => undefined,
  );
  if (models?.data?.some((m) => m.id === model)) break;
  if (Date.now() - started > 120_000) {
    console.error(`demo: ${model} did not appear at ${base}/v1/models within 120 s`);
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 200));
}
if (question === '--wait-only') {
  console.log(`demo: ${model} is served too (${base}/v1/models)`);
  process.exit(0);
}

const messages = [...(system ? [{ role: 'system', content: system }] : []), { role: 'user', content: question }];
const body = { model, messages, temperature: 0, max_tokens: 64 };
const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const answer = await res.json();
if (!res.ok) {
  console.error(`demo: the chat completion failed (${res.status}): ${JSON.stringify(answer)}`);
  process.exit(1);
}
const choice = answer.choices[0];
console.log(
  `\ndemo: ${model} answered in ${((Date.now() - started) / 1000).toFixed(1)} s (finish_reason ${choice.finish_reason}, ${answer.usage.completion_tokens} tokens):`,
);
console.log(JSON.stringify(choice.message.content));
const next = { ...body, messages: [...messages.slice(0, -1), { role: 'user', content: 'Tell me a story' }] };
console.log(`\nTry next:\n  curl -s ${base}/v1/chat/completions -H 'content-type: application/json' \\\n    -d '${JSON.stringify(next)}'\n`);

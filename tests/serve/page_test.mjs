// The chat page at / in headless Chromium (Debian's chromium, driven by
// puppeteer-core): load it, send a message, watch the reply stream in, then
// stop a second reply midway and check that the server freed its slot.
// Usage: node page_test.mjs BASE_URL API_KEY
import assert from "node:assert/strict";
import puppeteer from "puppeteer-core";

const [base, key] = process.argv.slice(2);
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const metric = async (name) => {
  const r = await fetch(base + "/metrics", { headers: { Authorization: "Bearer " + key } });
  const m = (await r.text()).match(new RegExp("^" + name + " (\\S+)$", "m"));
  return m ? Number(m[1]) : NaN;
};
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(base + "/", { waitUntil: "networkidle0" });
  assert.equal(await page.title(), "zinc chat");
  await page.type("#api_key", key);
  await page.$eval("#api_key", (e) => e.dispatchEvent(new Event("change")));

  // A reply that streams: a greedy one (the same on every run), whose text
  // the page shows in several steps (counted by a MutationObserver) before
  // it is done.
  await page.$eval("#max_tokens", (e) => (e.value = "40"));
  await page.$eval("#temperature", (e) => (e.value = "0"));
  await page.evaluate(() => {
    window.lengths = new Set();
    new MutationObserver(() => {
      const e = document.querySelector(".msg.assistant:last-child");
      if (e) window.lengths.add(e.textContent.length);
    }).observe(document.querySelector("#log"), { subtree: true, childList: true, characterData: true });
  });
  await page.type("#input", "Hello there");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => {
    const e = document.querySelector(".msg.assistant:last-child");
    return e && e.dataset.state !== "streaming";
  }, { timeout: 60000 });
  const first = await page.$eval(".msg.assistant:last-child", (e) => ({ ...e.dataset, text: e.textContent }));
  const lengths = await page.evaluate(() => [...window.lengths]);
  assert.equal(first.state, "done", JSON.stringify(first));
  assert.ok(first.finish === "length" || first.finish === "stop", JSON.stringify(first));
  assert.ok(first.text.length > 0);
  assert.ok(lengths.length >= 3, `the reply did not stream: lengths seen ${lengths}`);
  console.log(`page_test: a streamed reply of ${first.text.length} characters, ${lengths.length} lengths seen`);

  // A long reply, stopped midway: the page says so and the server frees the
  // slot. (A random-weight model may end a reply by itself at once; then
  // the attempt is repeated in a new chat.)
  const cancelled = await metric("zinc_generations_cancelled_total");
  await page.$eval("#max_tokens", (e) => (e.value = "100000"));
  await page.$eval("#temperature", (e) => (e.value = "0.8"));
  let stopped = false;
  for (let attempt = 0; attempt < 5 && !stopped; attempt++) {
    await page.click("#clear");
    await page.type("#input", "Go on, attempt " + attempt);
    await page.keyboard.press("Enter");
    const state = await page.waitForFunction(() => {
      const e = document.querySelector(".msg.assistant:last-child");
      if (!e) return false;
      if (e.dataset.state !== "streaming") return e.dataset.state;
      return e.textContent.length > 5 && "streaming";
    }, { timeout: 60000 }).then((h) => h.jsonValue());
    if (state !== "streaming") continue;
    await page.click("#stop");
    await page.waitForFunction(() => document.querySelector(".msg.assistant:last-child").dataset.state === "stopped",
      { timeout: 10000 });
    stopped = true;
  }
  assert.ok(stopped, "no reply lasted long enough to be stopped in 5 attempts");
  assert.equal(await page.$eval("#send", (e) => e.disabled), false);
  let busy = 1;
  for (let i = 0; i < 100 && busy; i++) {
    busy = await metric("zinc_slots_busy");
    if (busy) await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(busy, 0, "the stopped reply still holds a slot");
  assert.equal(await metric("zinc_generations_cancelled_total"), cancelled + 1);
  assert.deepEqual(errors, []);
  console.log("page_test: stop works; all passed");
} finally {
  await browser.close();
}

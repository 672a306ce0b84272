// The board in headless Chromium, on the seed story's store served by the Rust test that runs
// this script (`tests/browser.rs`). It opens the board at the story's three moments, answers the
// gate from the inbox as the maintainer, checks that a person who does not own the gate gets no
// form and that a forged post is refused, and saves a screenshot of each page.
//
// Environment: BOARD (the board's base URL), CHROMIUM (the browser), SHOTS (where screenshots
// go), MAINTAINER_TOKEN and REVIEWER_TOKEN. `POST BOARD/story/next` moves the story on.
// Prints one JSON line: the checks that passed. Any failed check throws, and the exit code is 1.
import { chromium } from "playwright-core";

const base = process.env.BOARD;
const shots = process.env.SHOTS;
const passed = [];

function check(name, condition, detail) {
  if (!condition) throw new Error(`${name}: ${detail ?? "failed"}`);
  passed.push(name);
}

async function text(page, selector) {
  return (await page.locator(selector).allInnerTexts()).map((t) => t.replace(/\s+/g, " ").trim());
}

async function shot(page, name) {
  if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
}

async function next() {
  const response = await fetch(`${base}/story/next`, { method: "POST" });
  if (!response.ok) throw new Error(`the story did not move on: ${response.status}`);
}

async function signIn(page, token) {
  await page.goto(`${base}/inbox`);
  await page.fill("form.sign-in input[name=token]", token);
  await Promise.all([page.waitForNavigation(), page.click("form.sign-in button")]);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM,
  args: ["--no-sandbox", "--disable-gpu"],
});
try {
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
  const page = await context.newPage();

  // Moment one: the gate is open, the agent works on independent todos meanwhile.
  await page.goto(`${base}/`);
  const row = (await text(page, "table.goals tbody tr"))[0] ?? "";
  check("goals: the goal waits on a person", row.includes("cli-json-output") && row.includes("waiting"), row);
  check("goals: the budget gauges", (await page.locator("tr[data-goal] meter").count()) === 2);
  await shot(page, "board-goals");
  await page.goto(`${base}/goals/cli-json-output`);
  const gate = (await text(page, "tr[data-gate]"))[0] ?? "";
  check("goal: the gate with its owner", gate.includes("error-code-name") && gate.includes("person:maintainer"), gate);
  check("goal: the frontier", (await text(page, "tr.frontier td:first-child code"))[0] === "update-help");

  // Moment two: a newer commit makes the JSON-schema evidence stale.
  await next();
  await page.reload();
  const json = (await text(page, "tr[data-criterion=json-schema-tested]"))[0] ?? "";
  check("goal: stale evidence names the newer revision", json.includes("superseded by git:def456") && json.includes("git:abc123"), json);
  const commit = await text(page, "table.timeline tbody tr:first-child td");
  check(
    "goal: the timeline's newest commit with its actor, command and receipt",
    commit[0] === "r11" && commit[2] === "agent:agent-a" && commit[3].startsWith("settle_turn") && /^op-[0-9a-f]+ digest [0-9a-f]{12}… · revision 11 · 1 event$/.test(commit[4]),
    commit.join(" | "),
  );
  await shot(page, "board-goal-stale");

  // Someone who does not own the gate reads it but gets no form; a forged post is refused.
  const reviewer = await browser.newContext();
  const theirs = await reviewer.newPage();
  await signIn(theirs, process.env.REVIEWER_TOKEN);
  check("inbox: the reviewer is signed in", (await text(theirs, "form.session"))[0]?.includes("person:reviewer"));
  check("inbox: no form for someone else's gate", (await theirs.locator("form.answer").count()) === 0);
  check("inbox: the gate is shown read-only", (await theirs.locator("article.gate").count()) === 1);
  const forged = await theirs.evaluate(async () => {
    const body = new URLSearchParams({ csrf: "forged", goal: "cli-json-output", gate: "error-code-name", kind: "resolve", text: "yes" });
    const response = await fetch("/inbox/answer", { method: "POST", body });
    return response.status;
  });
  check("inbox: a forged post is refused", forged === 403, `status ${forged}`);
  await reviewer.close();

  // The maintainer answers from the inbox; a goals page open meanwhile follows live.
  const watcher = await context.newPage();
  await watcher.goto(`${base}/goals/cli-json-output`);
  check("goal: the agent asks the maintainer", (await text(watcher, ".decision"))[0]?.includes("ask: gate error-code-name"));
  await signIn(page, process.env.MAINTAINER_TOKEN);
  check("inbox: the maintainer's form", (await page.locator("article.gate form.answer.resolve").count()) === 1);
  await shot(page, "board-inbox");
  await page.fill("form.answer.resolve input[name=text]", "yes, keep error_code");
  await Promise.all([page.waitForURL(/answered=/), page.click("form.answer.resolve button")]);
  check("inbox: the answer is recorded", (await text(page, ".notice.done"))[0]?.includes("error-code-name"));
  await watcher.waitForFunction(
    () => document.querySelector(".decision")?.textContent.includes("continue"),
    null,
    { timeout: 20000 },
  );
  const decision = (await text(watcher, ".decision"))[0] ?? "";
  check("goal: the waiting agent's decision changed, live", decision.includes("continue: work on `document-json`"), decision);

  // Moment three: the last turn lands and the goal is accepted.
  await next();
  await page.goto(`${base}/`);
  const done = (await text(page, "table.goals tbody tr"))[0] ?? "";
  check("goals: accepted", done.includes("accepted") && done.includes("terminal (accepted)"), done);
  await shot(page, "board-goals-accepted");
  await page.goto(`${base}/goals/cli-json-output`);
  const criteria = await text(page, "tr[data-criterion] td:nth-child(2)");
  check("goal: every criterion met", criteria.length === 2 && criteria.every((c) => c === "met"), criteria.join(", "));
  await shot(page, "board-goal-accepted");
  console.log(JSON.stringify({ passed }));
} finally {
  await browser.close();
}

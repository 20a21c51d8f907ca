import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { App } from "./App";
import type { AgentEvent, GeneratedAnswer, ThreadDetail, ThreadOut, TurnOut } from "./types";

const KEY = "sleuth_test";
const COLLECTION = {
  name: "statutes",
  embedding_model: "m",
  dim: 4,
  backend: "numpy",
  created_at: "2026-01-01T00:00:00Z",
  n_documents: 1,
  n_chunks: 10,
  n_failed: 0,
};
const thread = (id: string, title: string, turns: TurnOut[] = []): ThreadDetail => ({
  thread_id: id,
  collection: "statutes",
  title,
  created_at: "2026-01-01T00:00:00Z",
  updated_at: "2026-01-01T00:00:00Z",
  turn_count: turns.length,
  turns,
});
const out = ({ turns: _turns, ...t }: ThreadDetail): ThreadOut => t;
const turn = (position: number, question: string, rewritten: string | null, taskId: string): TurnOut => ({
  position,
  question,
  rewritten_question: rewritten,
  answer: position ? "Up to half the longest term [BNS_S62]." : "Up to three years [BNS_S303].",
  citations: [position ? "BNS_S62" : "BNS_S303"],
  status: "completed",
  task_id: taskId,
  created_at: "2026-01-01T00:00:00Z",
});
const answer = (sid: string): GeneratedAnswer => ({
  answer_text: `The answer [${sid}].`,
  key_points: [],
  citations: [{ source_id: sid, number: 1, title: sid, text: "…", support: 0.9 }],
  is_insufficient_context: false,
  ungrounded_sentences: [],
});
/** An event without what the server numbers and stamps. */
type Bare<E> = E extends unknown ? Omit<E, "seq" | "task_id" | "timestamp"> : never;

function sse(taskId: string, events: Bare<AgentEvent>[]): string {
  return events
    .map((e, i) => {
      const full = { ...e, seq: i + 1, task_id: taskId, timestamp: 1000 + i };
      return `id: ${i + 1}\nevent: ${e.type}\ndata: ${JSON.stringify(full)}\n\n`;
    })
    .join("");
}

const FIRST_Q = "What is the punishment for theft?";
const FOLLOW_Q = "And if it is attempted?";
const REWRITTEN = "What is the punishment for attempted theft?";

interface Call {
  method: string;
  path: string;
  body: unknown;
  auth: string | null;
}

/** A fake API: the routes of one conversation (old "Murder" thread, new one "t-new"). */
function fakeApi() {
  const calls: Call[] = [];
  let threads: ThreadOut[] = [out(thread("t-old", "Murder", [turn(0, "Murder?", null, "r0")]))];
  let current = thread("t-new", "");
  const streams: Record<string, string> = {
    r1: sse("r1", [
      { type: "observe", content: `Question: ${FIRST_Q}` },
      { type: "tool_call", call_id: "c1", tool: "rag_search", arguments: { query: "theft" } },
      { type: "answer_delta", delta: "Up to ", stream: 1 },
      { type: "answer_delta", delta: "three years.", stream: 1 },
      { type: "answer", answer: answer("BNS_S303"), status: "completed", revised: false },
      { type: "done", status: "completed" },
    ]),
    r2: sse("r2", [
      { type: "observe", content: `Follow-up made standalone (by the model): ${REWRITTEN}` },
      { type: "observe", content: `Question: ${REWRITTEN}` },
      { type: "answer", answer: answer("BNS_S62"), status: "completed" },
      { type: "done", status: "completed" },
    ]),
  };
  let runs = 0;
  /** Set: the stream of run r2 waits after its first event until `release` is called. */
  let hold: Promise<void> | null = null;
  let release = () => undefined as void;
  const json = (body: unknown, status = 200) =>
    new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  const fetch = vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = new URL(String(input), "http://test");
    const method = init?.method ?? "GET";
    const body = init?.body ? JSON.parse(String(init.body)) : undefined;
    const auth = new Headers(init?.headers).get("Authorization");
    calls.push({ method, path: url.pathname + url.search, body, auth });
    const route = `${method} ${url.pathname}`;
    if (route === "GET /collections") return json([COLLECTION]);
    if (route === "GET /agent/search") return json([]);
    if (route === "GET /threads") return json(threads);
    if (route === "POST /threads") {
      threads = [out(current), ...threads];
      return json(out(current), 201);
    }
    if (route === "GET /threads/t-new") return json(current);
    if (route === "GET /threads/t-old") {
      return json(thread("t-old", "Murder", [turn(0, "Murder?", null, "r0")]));
    }
    if (route === "DELETE /threads/t-old") {
      threads = threads.filter((t) => t.thread_id !== "t-old");
      return new Response(null, { status: 204 });
    }
    if (route === "POST /agent/search") {
      runs += 1;
      const taskId = `r${runs}`;
      // the run becomes the thread's next turn
      const turns = [
        turn(0, FIRST_Q, null, "r1"),
        turn(1, FOLLOW_Q, REWRITTEN, "r2"),
      ].slice(0, runs);
      current = { ...thread("t-new", FIRST_Q, turns) };
      threads = threads.map((t) => (t.thread_id === "t-new" ? out(current) : t));
      return json(
        {
          task_id: taskId,
          status: "running",
          stream_url: `/agent/search/${taskId}/stream`,
          result_url: `/agent/search/${taskId}`,
        },
        202,
      );
    }
    const stream = /^GET \/agent\/search\/(\w+)\/stream$/.exec(route);
    if (stream && stream[1] === "r2" && hold) {
      const [head, ...rest] = streams.r2.split(/(?<=\n\n)/);
      const encoder = new TextEncoder();
      const waiting = hold;
      const body = new ReadableStream<Uint8Array>({
        async start(controller) {
          controller.enqueue(encoder.encode(head));
          await waiting;
          controller.enqueue(encoder.encode(rest.join("")));
          controller.close();
        },
      });
      return new Response(body, { headers: { "Content-Type": "text/event-stream" } });
    }
    if (stream) {
      return new Response(streams[stream[1]], {
        headers: { "Content-Type": "text/event-stream" },
      });
    }
    return json({ detail: `no route ${route}`, message: null }, 404);
  });
  const holdFollowUp = () => {
    hold = new Promise<void>((ok) => (release = ok));
  };
  return { fetch, calls, holdFollowUp, release: () => release() };
}

beforeEach(() => localStorage.setItem("sleuth.apiKey", KEY));
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  localStorage.clear();
});

function conversations() {
  return screen.getByRole("list", { name: "Conversations" });
}

describe("App conversations", () => {
  it("lists the collection's threads, starts one, asks, follows up and shows both turns", async () => {
    const api = fakeApi();
    vi.stubGlobal("fetch", api.fetch);
    const { container } = render(<App />);

    await within(conversations()).findByText("Murder");
    expect(api.calls.some((c) => c.path === "/threads?collection=statutes&limit=50")).toBe(true);
    expect(api.calls.every((c) => c.auth === `Bearer ${KEY}`)).toBe(true);

    fireEvent.click(screen.getByRole("button", { name: "New conversation" }));
    const first = await screen.findByLabelText("First question");
    expect(api.calls.find((c) => c.method === "POST" && c.path === "/threads")?.body).toEqual({
      collection: "statutes",
      title: "",
    });
    expect(screen.queryByLabelText("Question")).toBeNull(); // the single-question box is hidden

    fireEvent.change(first, { target: { value: FIRST_Q } });
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    const conversation = await screen.findByRole("region", { name: FIRST_Q });
    await waitFor(() => expect(conversation.querySelectorAll(".turn:not(.pending)").length).toBe(1));
    const asked = api.calls.filter((c) => c.method === "POST" && c.path === "/agent/search");
    expect(asked[0].body).toMatchObject({
      query: FIRST_Q,
      collection: "statutes",
      thread_id: "t-new",
      stream: true,
    });
    // the run's steps and its checked answer (the streamed draft is gone)
    await waitFor(() => expect(container.querySelector(".step-done")).toBeTruthy());
    expect(screen.queryByTestId("draft-text")).toBeNull();
    expect(container.querySelector('.answer-text button[data-source-id="BNS_S303"]')).toBeTruthy();

    fireEvent.change(screen.getByLabelText("Follow-up question"), { target: { value: FOLLOW_Q } });
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    await waitFor(() => expect(conversation.querySelectorAll(".turn:not(.pending)").length).toBe(2));
    expect(api.calls.filter((c) => c.path === "/agent/search" && c.method === "POST")[1].body)
      .toMatchObject({ query: FOLLOW_Q, thread_id: "t-new" });
    const turns = conversation.querySelectorAll(".turn");
    expect(turns[1].textContent).toContain(FOLLOW_Q);
    expect(within(turns[1] as HTMLElement).getByText(REWRITTEN).closest(".searched-as")).toBeTruthy();
    expect(turns[0].querySelector(".searched-as")).toBeNull(); // a first turn is not rewritten
    expect(turns[1].querySelector('button.cite[data-source-id="BNS_S62"]')).toBeTruthy();
    // the reasoning panel shows the rewrite too
    await waitFor(() => expect(container.querySelector(".step-done")).toBeTruthy());
    const rewrite = container.querySelector(".step-followup");
    expect(rewrite?.textContent).toContain(`Searched as: ${REWRITTEN}`);
    // the list has the thread under its new title
    await within(conversations()).findByText(FIRST_Q);
  });

  it("shows the follow-up being answered, with its standalone rewrite, before its turn is kept", async () => {
    const api = fakeApi();
    api.holdFollowUp();
    vi.stubGlobal("fetch", api.fetch);
    render(<App />);
    fireEvent.click(await screen.findByRole("button", { name: "New conversation" }));
    fireEvent.change(await screen.findByLabelText("First question"), { target: { value: FIRST_Q } });
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    const conversation = await screen.findByRole("region", { name: FIRST_Q });
    await waitFor(() => expect(conversation.querySelectorAll(".turn").length).toBe(1));

    fireEvent.change(await screen.findByLabelText("Follow-up question"), {
      target: { value: FOLLOW_Q },
    });
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    const pending = await waitFor(() => {
      const p = conversation.querySelector<HTMLElement>(".turn.pending .searched-as");
      expect(p).toBeTruthy();
      return p!;
    });
    expect(pending.textContent).toBe(`searched as: ${REWRITTEN}`);
    expect(conversation.querySelector(".turn.pending")?.textContent).toContain(FOLLOW_Q);
    expect((screen.getByRole("button", { name: "Send" }) as HTMLButtonElement).disabled).toBe(true);

    api.release();
    await waitFor(() => expect(conversation.querySelector(".turn.pending")).toBeNull());
    expect(conversation.querySelectorAll(".turn").length).toBe(2);
  });

  it("opens a thread's turns and deletes a thread after a confirmation", async () => {
    const api = fakeApi();
    vi.stubGlobal("fetch", api.fetch);
    render(<App />);
    fireEvent.click(await within(conversations()).findByText("Murder"));
    const conversation = await screen.findByRole("region", { name: "Murder" });
    await within(conversation).findByText("Murder?");
    expect(within(conversation).getByLabelText("Follow-up question")).toBeTruthy();

    fireEvent.click(screen.getByRole("button", { name: "Delete the conversation Murder" }));
    expect(api.calls.some((c) => c.method === "DELETE")).toBe(false);
    fireEvent.click(within(conversations()).getByRole("button", { name: "Delete" }));
    await waitFor(() => expect(within(conversations()).queryByText("Murder")).toBeNull());
    expect(api.calls.some((c) => c.method === "DELETE" && c.path === "/threads/t-old")).toBe(true);
    // the open thread was the deleted one: back to single questions
    expect(screen.queryByRole("region", { name: "Murder" })).toBeNull();
    expect(screen.getByLabelText("Question")).toBeTruthy();
  });
});

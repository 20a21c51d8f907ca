import { cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { ReasoningPanel } from "./ReasoningPanel";
import type { AgentEvent } from "./types";

afterEach(cleanup);

const base = (seq: number) => ({ seq, task_id: "t1", timestamp: 1000 + seq * 0.5 });
const answer = {
  answer_text: "Death or imprisonment for life [BNS_S103].",
  key_points: [],
  citations: [{ source_id: "BNS_S103", number: 1, title: "S103", text: "…", support: 0.8 }],
  is_insufficient_context: false,
  ungrounded_sentences: [],
};

const EVENTS: AgentEvent[] = [
  { ...base(1), type: "observe", content: "Question: What is the punishment for murder?" },
  { ...base(2), type: "think", content: "Plan: search for the punishment of murder", iteration: 0 },
  {
    ...base(3),
    type: "tool_call",
    call_id: "c1",
    tool: "rag_search",
    arguments: { query: "punishment for murder", top_k: 5 },
  },
  {
    ...base(4),
    type: "tool_result",
    call_id: "c1",
    tool: "rag_search",
    ok: true,
    status: "found 5 sections",
    preview: "BNS_S103 Punishment for murder …",
    payload: {},
    duration_ms: 42.4,
  },
  {
    ...base(5),
    type: "think",
    content:
      "CRAG verdict: PARTIAL — missing: the fine for murder (round 0, query 'murder'). I will refine the query.",
    iteration: 1,
  },
  {
    ...base(6),
    type: "think",
    content: "Refinement (round 1): searching 'murder fine' — targets the missing information",
    iteration: 2,
  },
  { ...base(7), type: "think", content: "Reflection: the answer cites every claim.", iteration: 3 },
  { ...base(8), type: "answer", answer, status: "completed" },
  { ...base(9), type: "done", status: "completed" },
];

function steps() {
  return screen.getAllByRole("listitem");
}

describe("ReasoningPanel", () => {
  it("renders each event type as its own step, in order", () => {
    render(<ReasoningPanel events={EVENTS} running={false} />);
    const kinds = steps().map((li) => li.getAttribute("data-kind"));
    expect(kinds).toEqual([
      "observe",
      "think",
      "tool_call",
      "tool_result",
      "crag",
      "refinement",
      "reflection",
      "answer",
      "done",
    ]);
  });

  it("shows a think step's content", () => {
    render(<ReasoningPanel events={EVENTS.slice(0, 2)} running />);
    expect(screen.getByText(/Plan: search for the punishment/)).toBeTruthy();
  });

  it("shows a tool call with its arguments", () => {
    render(<ReasoningPanel events={EVENTS.slice(2, 3)} running />);
    const step = steps()[0];
    expect(within(step).getByText("rag_search")).toBeTruthy();
    expect(within(step).getByText("query")).toBeTruthy();
    expect(within(step).getByText("punishment for murder")).toBeTruthy();
    expect(within(step).getByText("top_k")).toBeTruthy();
  });

  it("shows a tool result with its status, duration and an expandable preview", () => {
    render(<ReasoningPanel events={EVENTS.slice(3, 4)} running />);
    const step = steps()[0];
    expect(within(step).getByText(/found 5 sections/)).toBeTruthy();
    expect(within(step).getByText(/42 ms/)).toBeTruthy();
    const details = step.querySelector("details")!;
    expect(details.open).toBe(false);
    fireEvent.click(within(step).getByText("Preview"));
    expect(within(step).getByText(/BNS_S103 Punishment for murder/)).toBeTruthy();
  });

  it("shows a CRAG verdict with its gap hint", () => {
    render(<ReasoningPanel events={EVENTS.slice(4, 5)} running />);
    const step = steps()[0];
    expect(within(step).getByText("PARTIAL").className).toContain("verdict-partial");
    expect(within(step).getByText("the fine for murder")).toBeTruthy();
  });

  it("labels refinement and reflection steps", () => {
    render(<ReasoningPanel events={EVENTS.slice(5, 7)} running />);
    const [refine, reflect] = steps();
    expect(within(refine).getByText("Refinement")).toBeTruthy();
    expect(within(reflect).getByText("Reflection")).toBeTruthy();
  });

  it("shows step timings", () => {
    render(<ReasoningPanel events={EVENTS.slice(0, 3)} running />);
    expect(within(steps()[2]).getByText(/\+1\.0 s \(500 ms\)/)).toBeTruthy();
  });

  it("shows a running indicator until the terminal event", () => {
    const { rerender } = render(<ReasoningPanel events={EVENTS.slice(0, 8)} running />);
    expect(screen.getByRole("status").textContent).toMatch(/Running/);
    rerender(<ReasoningPanel events={EVENTS} running={false} />);
    expect(screen.getByRole("status").textContent).toMatch(/Finished in 4\.0 s: completed/);
    expect(screen.queryByText(/Running/)).toBeNull();
  });

  it("announces new steps politely", () => {
    render(<ReasoningPanel events={EVENTS} running={false} />);
    expect(screen.getByRole("list").getAttribute("aria-live")).toBe("polite");
  });

  it("shows a run's error event as an error state", () => {
    const events: AgentEvent[] = [
      EVENTS[0],
      { ...base(2), type: "error", message: "the model server is unreachable" },
    ];
    render(<ReasoningPanel events={events} running={false} />);
    const alert = screen.getByRole("alert");
    expect(alert.textContent).toMatch(/The run failed/);
    expect(alert.textContent).toMatch(/model server is unreachable/);
    expect(steps()[1].getAttribute("data-kind")).toBe("error");
  });

  it("shows a failed stream as an error state, without the running indicator", () => {
    render(
      <ReasoningPanel events={EVENTS.slice(0, 2)} running streamError="network error" />,
    );
    const alert = screen.getByRole("alert");
    expect(alert.textContent).toMatch(/The stream failed/);
    expect(alert.textContent).toMatch(/network error/);
    expect(screen.queryByText(/Running/)).toBeNull();
  });

  it("does not list answer_delta events as steps (a model sends hundreds)", () => {
    const pieces: AgentEvent[] = Array.from({ length: 200 }, (_, i) => ({
      ...base(3 + i * 0.001),
      type: "answer_delta",
      delta: `piece ${i} `,
      stream: 1,
    }));
    render(<ReasoningPanel events={[...EVENTS.slice(0, 2), ...pieces, ...EVENTS.slice(7)]} running={false} />);
    expect(steps().map((li) => li.getAttribute("data-kind"))).toEqual([
      "observe",
      "think",
      "answer",
      "done",
    ]);
    expect(screen.queryByText(/piece 0/)).toBeNull();
  });

  it("shows a follow-up's standalone rewrite as its own step", () => {
    const followUp: AgentEvent = {
      ...base(1),
      type: "observe",
      content: "Follow-up made standalone (the previous question): And if attempted? (following up: theft)",
    };
    render(<ReasoningPanel events={[followUp]} running />);
    const step = steps()[0];
    expect(step.getAttribute("data-kind")).toBe("followup");
    expect(within(step).getByText("Follow-up")).toBeTruthy();
    expect(step.textContent).toContain("Searched as: And if attempted? (following up: theft)");
  });
});

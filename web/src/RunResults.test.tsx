import { cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { RunResults } from "./RunResults";
import { runView } from "./steps";
import type { AgentEvent, GeneratedAnswer } from "./types";

afterEach(cleanup);

const base = (seq: number) => ({ seq, task_id: "t1", timestamp: 1000 + seq * 0.5 });
const ANSWER: GeneratedAnswer = {
  answer_text: "Imprisonment up to three years [BNS_S303].",
  key_points: [],
  citations: [{ source_id: "BNS_S303", number: 1, title: "S303", text: "…", support: 0.8 }],
  is_insufficient_context: false,
  ungrounded_sentences: [],
};
const STEPS: AgentEvent[] = [
  { ...base(1), type: "observe", content: "Question: What is the punishment for theft?" },
  { ...base(2), type: "think", content: "Plan: search theft", iteration: 0 },
];
const deltas = (from: number, pieces: string[], stream = 1): AgentEvent[] =>
  pieces.map((delta, i) => ({ ...base(from + i), type: "answer_delta", delta, stream }));

function show(events: AgentEvent[], running: boolean) {
  return (
    <RunResults run={runView(events)} running={running} streamError={null} onCite={() => undefined} />
  );
}

describe("RunResults", () => {
  it("shows the draft answer growing as pieces arrive, without listing them as steps", () => {
    const { rerender } = render(show([...STEPS, ...deltas(3, ["Imprisonment ", "up to"])], true));
    expect(screen.getByTestId("draft-text").textContent).toBe("Imprisonment up to");
    expect(screen.getByRole("heading", { name: "Draft answer" })).toBeTruthy();
    expect(screen.getAllByRole("listitem").map((li) => li.dataset.kind)).toEqual([
      "observe",
      "think",
    ]);
    rerender(show([...STEPS, ...deltas(3, ["Imprisonment ", "up to", " three years."])], true));
    expect(screen.getByTestId("draft-text").textContent).toBe("Imprisonment up to three years.");
    expect(screen.queryByRole("heading", { name: "Answer" })).toBeNull();
  });

  it("replaces the draft's text with a later stream's", () => {
    const events = [...STEPS, ...deltas(3, ["First ", "try"]), ...deltas(5, ["Second"], 2)];
    render(show(events, true));
    expect(screen.getByTestId("draft-text").textContent).toBe("Second");
    expect(screen.getByText(/Rewrite 2/)).toBeTruthy();
  });

  it("puts the checked answer in the draft's place, with no notice when it was not revised", () => {
    const events: AgentEvent[] = [
      ...STEPS,
      ...deltas(3, ["Imprisonment up to three years [1]."]),
      { ...base(4), type: "answer", answer: ANSWER, status: "completed", revised: false },
      { ...base(5), type: "done", status: "completed" },
    ];
    const { container } = render(show(events, false));
    expect(screen.queryByTestId("draft-text")).toBeNull();
    expect(screen.getByRole("heading", { name: "Answer" })).toBeTruthy();
    expect(container.querySelector('.answer-text button[data-source-id="BNS_S303"]')).toBeTruthy();
    expect(screen.queryByText(/differs from the streamed draft/)).toBeNull();
  });

  it("says so when the checked answer differs from the streamed draft, keeping the draft", () => {
    const events: AgentEvent[] = [
      ...STEPS,
      ...deltas(3, ["Death ", "penalty."]),
      { ...base(5), type: "answer", answer: ANSWER, status: "completed", revised: true },
      { ...base(6), type: "done", status: "completed" },
    ];
    render(show(events, false));
    const note = screen.getByRole("note");
    expect(note.textContent).toMatch(/The checked answer differs from the streamed draft/);
    fireEvent.click(screen.getByText("Show the streamed draft"));
    expect(note.textContent).toContain("Death penalty.");
    expect(screen.getByText(/Imprisonment up to three years/)).toBeTruthy();
    expect(screen.getByText(/the checks revised the streamed draft/)).toBeTruthy();
  });

  it("works as before without streamed text (the heuristic reasoner)", () => {
    const events: AgentEvent[] = [
      ...STEPS,
      { ...base(3), type: "answer", answer: ANSWER, status: "completed" },
      { ...base(4), type: "done", status: "completed" },
    ];
    const { container } = render(show(events, false));
    expect(screen.queryByRole("heading", { name: "Draft answer" })).toBeNull();
    expect(screen.queryByRole("note")).toBeNull();
    expect(screen.getByRole("heading", { name: "Answer" })).toBeTruthy();
    const steps = [...container.querySelectorAll<HTMLElement>(".step")];
    expect(steps.map((li) => li.dataset.kind)).toEqual([
      "observe",
      "think",
      "answer",
      "done",
    ]);
  });

  it("keeps a draft the run never checked, saying so", () => {
    const events: AgentEvent[] = [
      ...STEPS,
      ...deltas(3, ["Half an"]),
      { ...base(4), type: "error", message: "the model server is unreachable" },
    ];
    render(show(events, false));
    expect(screen.getByTestId("draft-text").textContent).toBe("Half an");
    expect(screen.getByText(/ended before the draft was checked/)).toBeTruthy();
  });
});

import { describe, expect, it } from "vitest";
import { EMPTY_RUN, followUpOf, kindOf, reduceRun, runView, seconds } from "./steps";
import type { AgentEvent } from "./types";

describe("seconds", () => {
  it("shows milliseconds for sub-second steps, so a fast run does not read +0.0 s", () => {
    expect(seconds(0.0372)).toBe("37 ms");
    expect(seconds(0)).toBe("0 ms");
    expect(seconds(2.44)).toBe("2.4 s");
    expect(seconds(41.2)).toBe("41 s");
  });
});

const base = (seq: number) => ({ seq, task_id: "t1", timestamp: 1000 + seq });
const delta = (seq: number, text: string, stream = 1): AgentEvent => ({
  ...base(seq),
  type: "answer_delta",
  delta: text,
  stream,
});

describe("reduceRun", () => {
  it("adds the pieces of a stream up into the draft, not into the steps", () => {
    const think: AgentEvent = { ...base(1), type: "think", content: "Plan", iteration: 0 };
    const run = runView([think, delta(2, "Death or "), delta(3, "imprisonment"), delta(4, " for life.")]);
    expect(run.steps).toEqual([think]);
    expect(run.draft).toEqual({ stream: 1, text: "Death or imprisonment for life." });
  });

  it("replaces the draft with a later stream's text (a repair round)", () => {
    const run = runView([delta(1, "Wrong "), delta(2, "answer."), delta(3, "Right", 2), delta(4, " one.", 2)]);
    expect(run.draft).toEqual({ stream: 2, text: "Right one." });
  });

  it("drops a late piece of an earlier stream", () => {
    const run = runView([delta(1, "A", 2), delta(2, "stale", 1), delta(3, "B", 2)]);
    expect(run.draft).toEqual({ stream: 2, text: "AB" });
  });

  it("keeps every other event as a step, in order, and has no draft without deltas", () => {
    const events: AgentEvent[] = [
      { ...base(1), type: "observe", content: "Question: q" },
      { ...base(2), type: "done", status: "completed" },
    ];
    const run = events.reduce(reduceRun, EMPTY_RUN);
    expect(run.steps).toEqual(events);
    expect(run.draft).toBeNull();
  });
});

describe("followUpOf", () => {
  it("reads the standalone question of a follow-up's observe event", () => {
    const e: AgentEvent = {
      ...base(1),
      type: "observe",
      content: "Follow-up made standalone (by the model): What is the punishment for attempted theft?",
    };
    expect(followUpOf(e)).toEqual({
      how: "by the model",
      question: "What is the punishment for attempted theft?",
    });
    expect(kindOf(e)).toBe("followup");
    const other: AgentEvent = { ...base(2), type: "observe", content: "Question: q" };
    expect(followUpOf(other)).toBeNull();
    expect(kindOf(other)).toBe("observe");
  });
});

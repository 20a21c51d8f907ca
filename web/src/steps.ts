import type { AgentEvent, AnswerEvent } from "./types";

export type StepKind =
  | "observe"
  | "followup"
  | "think"
  | "crag"
  | "refinement"
  | "reflection"
  | "tool_call"
  | "tool_result"
  | "answer_delta"
  | "answer"
  | "done"
  | "error";

export const KIND_LABEL: Record<StepKind, string> = {
  observe: "Observe",
  followup: "Follow-up",
  think: "Think",
  crag: "CRAG verdict",
  refinement: "Refinement",
  reflection: "Reflection",
  tool_call: "Tool call",
  tool_result: "Tool result",
  answer_delta: "Answer draft",
  answer: "Answer",
  done: "Done",
  error: "Error",
};

export interface Crag {
  verdict: string;
  gap: string | null;
}

/** What a step is: the guided runtime's CRAG verdicts, refinements and the reflections of
 * both runtimes are think events whose content starts with their name; a thread's follow-up
 * made standalone is an observe event ("Follow-up made standalone …"). */
export function kindOf(e: AgentEvent): StepKind {
  if (e.type === "observe" && followUpOf(e)) return "followup";
  if (e.type !== "think") return e.type;
  const c = e.content.trimStart();
  if (/^CRAG verdict/i.test(c)) return "crag";
  if (/^Refinement/i.test(c)) return "refinement";
  if (/^Reflection/i.test(c)) return "reflection";
  return "think";
}

/** "CRAG verdict: PARTIAL — missing: the punishment (round 0, query '…')." → verdict + gap */
export function parseCrag(content: string): Crag {
  const verdict = /\b(SUFFICIENT|PARTIAL|INSUFFICIENT|INCORRECT|AMBIGUOUS)\b/.exec(content);
  const gap = /missing:\s*(.*?)\s*(?:\(round \d+|$)/s.exec(content);
  return { verdict: verdict ? verdict[1] : "?", gap: gap ? gap[1].trim() || null : null };
}

/** A duration for the step list: "37 ms" under a second (fast runs), "2.4 s", "41 s". */
export function seconds(s: number): string {
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  return s < 10 ? `${s.toFixed(1)} s` : `${Math.round(s)} s`;
}

/** The streamed answer text of the latest stream (answer_delta events). */
export interface Draft {
  stream: number;
  text: string;
}

/** What the app keeps of a run's events: the steps to list, and the streamed draft of the
 * answer, which is not listed (a model sends hundreds of pieces). */
export interface RunView {
  steps: AgentEvent[];
  draft: Draft | null;
}

export const EMPTY_RUN: RunView = { steps: [], draft: null };

/** Adds one event to a run's view: an answer_delta extends the draft of its stream, or
 * starts a new draft when its stream is a later one (a repair round replaces the text);
 * a piece of an earlier stream is dropped. Every other event is a step. */
export function reduceRun(run: RunView, e: AgentEvent): RunView {
  if (e.type !== "answer_delta") return { ...run, steps: [...run.steps, e] };
  const d = run.draft;
  if (d && e.stream < d.stream) return run;
  const text = d && d.stream === e.stream ? d.text + e.delta : e.delta;
  return { ...run, draft: { stream: e.stream, text } };
}

/** A run's view from its events, in order. */
export function runView(events: AgentEvent[]): RunView {
  return events.reduce(reduceRun, EMPTY_RUN);
}

/** The run's checked answer, once its answer event has come. */
export function answerOf(steps: AgentEvent[]): AnswerEvent | null {
  const e = steps.find((x) => x.type === "answer");
  return e?.type === "answer" ? e : null;
}

export interface FollowUp {
  /** "by the model" or "the previous question" */
  how: string;
  question: string;
}

/** "Follow-up made standalone (by the model): What is …?" (an observe event of a thread's
 * follow-up) → how it was rewritten and the standalone question; null for other events. */
export function followUpOf(e: AgentEvent): FollowUp | null {
  if (e.type !== "observe") return null;
  const m = /^Follow-up made standalone(?:\s*\(([^)]*)\))?:\s*([\s\S]*)$/.exec(e.content.trim());
  return m ? { how: m[1] ?? "", question: m[2].trim() } : null;
}

import type { AgentEvent } from "./types";

export type StepKind =
  | "observe"
  | "think"
  | "crag"
  | "refinement"
  | "reflection"
  | "tool_call"
  | "tool_result"
  | "answer"
  | "done"
  | "error";

export const KIND_LABEL: Record<StepKind, string> = {
  observe: "Observe",
  think: "Think",
  crag: "CRAG verdict",
  refinement: "Refinement",
  reflection: "Reflection",
  tool_call: "Tool call",
  tool_result: "Tool result",
  answer: "Answer",
  done: "Done",
  error: "Error",
};

export interface Crag {
  verdict: string;
  gap: string | null;
}

/** What a step is: the guided runtime's CRAG verdicts, refinements and the reflections of
 * both runtimes are think events whose content starts with their name. */
export function kindOf(e: AgentEvent): StepKind {
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

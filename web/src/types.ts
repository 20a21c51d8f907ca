// Types of the API's events and responses. They mirror the pydantic models named in each
// comment; tests/unit/test_web.py checks every interface here against the API's JSON schema
// (field names and event type names), so the two cannot drift apart.

interface EventBase {
  seq: number;
  task_id: string;
  /** Unix time, seconds */
  timestamp: number;
}

/** sleuth.agents.events.ObserveEvent */
export interface ObserveEvent extends EventBase {
  type: "observe";
  content: string;
}

/** sleuth.agents.events.ThinkEvent */
export interface ThinkEvent extends EventBase {
  type: "think";
  content: string;
  iteration: number;
}

/** sleuth.agents.events.ToolCallEvent */
export interface ToolCallEvent extends EventBase {
  type: "tool_call";
  call_id: string;
  tool: string;
  arguments: Record<string, unknown>;
}

/** sleuth.agents.events.ToolResultEvent */
export interface ToolResultEvent extends EventBase {
  type: "tool_result";
  call_id: string;
  tool: string;
  ok: boolean;
  status: string;
  preview: string;
  payload: Record<string, unknown>;
  duration_ms: number;
}

/** sleuth.agents.events.AnswerDeltaEvent: a piece of the answer text as the model writes
 * it. Pieces of one `stream` add up to the reply; a higher `stream` (a repair round)
 * replaces the text of the one before. Never sent by the heuristic (no model) reasoner. */
export interface AnswerDeltaEvent extends EventBase {
  type: "answer_delta";
  delta: string;
  stream: number;
}

/** sleuth.agents.events.AnswerEvent */
export interface AnswerEvent extends EventBase {
  type: "answer";
  answer: GeneratedAnswer;
  status: string;
  /** True when answer text was streamed and the checks changed it: show this one instead */
  revised?: boolean;
}

/** sleuth.agents.events.DoneEvent */
export interface DoneEvent extends EventBase {
  type: "done";
  status: string;
}

/** sleuth.agents.events.ErrorEvent */
export interface ErrorEvent extends EventBase {
  type: "error";
  message: string;
}

/** sleuth.agents.events.AgentEvent */
export type AgentEvent =
  | ObserveEvent
  | ThinkEvent
  | ToolCallEvent
  | ToolResultEvent
  | AnswerDeltaEvent
  | AnswerEvent
  | DoneEvent
  | ErrorEvent;

export const EVENT_TYPES = [
  "observe",
  "think",
  "tool_call",
  "tool_result",
  "answer_delta",
  "answer",
  "done",
  "error",
] as const;

/** sleuth.agents.answer.Citation */
export interface Citation {
  source_id: string;
  number: number | null;
  title: string;
  text: string;
  support: number | null;
}

/** sleuth.agents.answer.GeneratedAnswer */
export interface GeneratedAnswer {
  answer_text: string;
  /** For a factoid question: the bare entity, date, number or yes/no the answer opens with. */
  short_answer?: string | null;
  key_points: string[];
  citations: Citation[];
  is_insufficient_context: boolean;
  ungrounded_sentences: string[];
}

/** sleuth.api.schemas.RunState */
export type RunState =
  | "running"
  | "completed"
  | "insufficient_context"
  | "max_iterations"
  | "repeated_action"
  | "timeout"
  | "error"
  | "interrupted";

/** sleuth.api.schemas.AgentSearchRequest */
export interface AgentSearchRequest {
  query: string;
  collection: string;
  mode?: "react" | "guided";
  max_iterations?: number | null;
  timeout_s?: number | null;
  use_memory?: boolean;
  strict_grounding?: boolean | null;
  stream?: boolean;
  /** Ask in this conversation thread (one of the caller's, of this collection) */
  thread_id?: string | null;
}

/** sleuth.api.schemas.AgentSearchAccepted */
export interface AgentSearchAccepted {
  task_id: string;
  status: "running";
  stream_url: string;
  result_url: string;
}

/** sleuth.api.schemas.AgentSearchResponse (the fields the app reads are typed) */
export interface AgentSearchResponse {
  task_id: string;
  query: string;
  collection: string;
  mode: string;
  status: RunState;
  answer: string | null;
  key_points: string[];
  citations: Citation[];
  is_insufficient_context: boolean;
  ungrounded_sentences: string[];
  reasoning_steps: Record<string, unknown>[];
  tool_calls: Record<string, unknown>[];
  artifacts: Record<string, unknown>[];
  trace: Record<string, unknown>;
  error: string | null;
  created_at: string | null;
  finished_at: string | null;
}

/** sleuth.api.schemas.RunSummary */
export interface RunSummary {
  task_id: string;
  query: string;
  collection: string;
  mode: string;
  status: RunState;
  created_at: string | null;
  finished_at: string | null;
}

/** sleuth.api.schemas.CollectionOut */
export interface CollectionOut {
  name: string;
  embedding_model: string;
  dim: number;
  backend: string;
  created_at: string;
  n_documents: number;
  n_chunks: number;
  n_failed: number;
}

/** sleuth.api.schemas.OutlineItem */
export interface OutlineItem {
  source_id: string;
  title: string;
}

/** sleuth.api.schemas.SectionOut */
export interface SectionOut {
  source_id: string;
  doc_id: string;
  title: string;
  text: string;
  previous: string | null;
  next: string | null;
  outline_total: number;
  outline_start: number;
  outline: OutlineItem[];
}

/** sleuth.api.schemas.Problem */
export interface Problem {
  detail: unknown;
  message: string | null;
}

/** sleuth.api.schemas.ThreadCreate */
export interface ThreadCreate {
  collection: string;
  title?: string;
}

/** sleuth.api.schemas.ThreadOut */
export interface ThreadOut {
  thread_id: string;
  collection: string;
  title: string;
  created_at: string;
  updated_at: string;
  turn_count: number;
}

/** sleuth.api.schemas.TurnOut */
export interface TurnOut {
  position: number;
  question: string;
  /** The follow-up made standalone (null: asked as typed, e.g. a thread's first turn) */
  rewritten_question: string | null;
  answer: string;
  /** The source_ids the answer cited, in order */
  citations: string[];
  status: string;
  task_id: string | null;
  created_at: string;
}

/** sleuth.api.schemas.ThreadDetail: a thread with its turns, oldest first */
export interface ThreadDetail extends ThreadOut {
  turns: TurnOut[];
}

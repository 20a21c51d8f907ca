import { SseParser } from "./sse";
import type {
  AgentEvent,
  AgentSearchAccepted,
  AgentSearchRequest,
  AgentSearchResponse,
  CollectionOut,
  RunSummary,
  SectionOut,
  ThreadCreate,
  ThreadDetail,
  ThreadOut,
} from "./types";

export class ApiError extends Error {
  constructor(
    public status: number,
    message: string,
  ) {
    super(message);
  }
}

async function problem(r: Response): Promise<ApiError> {
  let detail = `${r.status} ${r.statusText}`;
  try {
    const body = await r.json();
    detail = body.message ?? (typeof body.detail === "string" ? body.detail : detail);
  } catch {
    /* not JSON */
  }
  return new ApiError(r.status, detail);
}

export class Api {
  constructor(
    private key: string,
    private base = "",
  ) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { Authorization: `Bearer ${this.key}`, ...extra };
  }

  async get<T>(path: string): Promise<T> {
    const r = await fetch(this.base + path, { headers: this.headers() });
    if (!r.ok) throw await problem(r);
    return (await r.json()) as T;
  }

  collections(): Promise<CollectionOut[]> {
    return this.get("/collections");
  }

  runs(): Promise<RunSummary[]> {
    return this.get("/agent/search?limit=50");
  }

  run(taskId: string): Promise<AgentSearchResponse> {
    return this.get(`/agent/search/${encodeURIComponent(taskId)}`);
  }

  section(collection: string, sourceId: string): Promise<SectionOut> {
    return this.get(
      `/collections/${encodeURIComponent(collection)}/sections/${encodeURIComponent(sourceId)}`,
    );
  }

  /** A request with a JSON body (or none); an empty answer (204) reads as undefined. */
  async send<T>(method: "POST" | "DELETE", path: string, body?: unknown): Promise<T> {
    const r = await fetch(this.base + path, {
      method,
      headers: this.headers(body === undefined ? {} : { "Content-Type": "application/json" }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!r.ok) throw await problem(r);
    return (r.status === 204 ? undefined : await r.json()) as T;
  }

  /** The caller's conversation threads over `collection`, the most recently used first. */
  threads(collection: string): Promise<ThreadOut[]> {
    return this.get(`/threads?collection=${encodeURIComponent(collection)}&limit=50`);
  }

  thread(threadId: string): Promise<ThreadDetail> {
    return this.get(`/threads/${encodeURIComponent(threadId)}`);
  }

  createThread(body: ThreadCreate): Promise<ThreadOut> {
    return this.send("POST", "/threads", body);
  }

  deleteThread(threadId: string): Promise<void> {
    return this.send("DELETE", `/threads/${encodeURIComponent(threadId)}`);
  }

  /** Starts a run (streamed: follow it with `stream`). */
  search(body: AgentSearchRequest): Promise<AgentSearchAccepted> {
    return this.send("POST", "/agent/search", { ...body, stream: true });
  }

  /** Follows a run's events until its terminal event; resumes (Last-Event-ID) after a
   * dropped connection, up to `retries` times. Throws if the stream cannot be read. */
  async stream(
    taskId: string,
    onEvent: (e: AgentEvent) => void,
    signal?: AbortSignal,
    retries = 3,
  ): Promise<void> {
    let last = 0;
    let failures = 0;
    for (;;) {
      try {
        const headers = this.headers({ Accept: "text/event-stream" });
        if (last) headers["Last-Event-ID"] = String(last);
        const r = await fetch(`${this.base}/agent/search/${encodeURIComponent(taskId)}/stream`, {
          headers,
          signal,
        });
        if (!r.ok) throw await problem(r);
        if (!r.body) throw new ApiError(0, "the stream has no body");
        const reader = r.body.getReader();
        const decoder = new TextDecoder();
        const parser = new SseParser();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          for (const msg of parser.feed(decoder.decode(value, { stream: true }))) {
            const event = JSON.parse(msg.data) as AgentEvent;
            if (event.seq <= last) continue;
            last = event.seq;
            failures = 0;
            onEvent(event);
            if (event.type === "done" || event.type === "error") return;
          }
        }
        throw new ApiError(0, "the stream ended before the run did");
      } catch (err) {
        if (signal?.aborted) throw err;
        if (err instanceof ApiError && err.status >= 400) throw err;
        failures += 1;
        if (failures > retries) throw err;
        await new Promise((ok) => setTimeout(ok, 500 * failures));
      }
    }
  }
}

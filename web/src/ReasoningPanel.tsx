import type { AgentEvent } from "./types";
import { KIND_LABEL, followUpOf, kindOf, parseCrag, seconds } from "./steps";

function Args({ args }: { args: Record<string, unknown> }) {
  const entries = Object.entries(args);
  if (!entries.length) return <span className="muted">no arguments</span>;
  return (
    <dl className="args">
      {entries.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>
            <code>{typeof v === "string" ? v : JSON.stringify(v)}</code>
          </dd>
        </div>
      ))}
    </dl>
  );
}

function Body({ event }: { event: AgentEvent }) {
  switch (event.type) {
    case "observe": {
      const followUp = followUpOf(event);
      if (followUp) {
        return (
          <p className="content">
            Searched as: <q className="rewritten">{followUp.question}</q>
            {followUp.how && <span className="muted"> (made standalone from {followUp.how})</span>}
          </p>
        );
      }
      return <p className="content">{event.content}</p>;
    }
    case "think": {
      const kind = kindOf(event);
      if (kind === "crag") {
        const { verdict, gap } = parseCrag(event.content);
        return (
          <>
            <p>
              <span className={`verdict verdict-${verdict.toLowerCase()}`}>{verdict}</span>
              {gap && (
                <span className="gap">
                  {" "}
                  Gap: <em>{gap}</em>
                </span>
              )}
            </p>
            <p className="content muted">{event.content}</p>
          </>
        );
      }
      return <p className="content">{event.content}</p>;
    }
    case "tool_call":
      return (
        <>
          <p>
            <code className="tool">{event.tool}</code>
          </p>
          <Args args={event.arguments} />
        </>
      );
    case "tool_result":
      return (
        <>
          <p className={event.ok ? "" : "failed"}>
            <code className="tool">{event.tool}</code> {event.ok ? "" : "failed: "}
            {event.status}
            <span className="timing"> ({Math.round(event.duration_ms)} ms)</span>
          </p>
          {event.preview && (
            <details>
              <summary>Preview</summary>
              <pre className="preview">{event.preview}</pre>
            </details>
          )}
        </>
      );
    case "answer_delta": // not listed (see ReasoningPanel): the draft shows them
      return <p className="content">{event.delta}</p>;
    case "answer":
      return (
        <p className="content">
          Answer written ({event.status}, {event.answer.citations.length} citations
          {event.revised ? "; the checks revised the streamed draft" : ""}).
        </p>
      );
    case "done":
      return <p className="content">Run finished: {event.status}</p>;
    case "error":
      return <p className="content">{event.message}</p>;
  }
}

export interface PanelProps {
  /** The run's events; answer_delta events are not listed (the draft answer shows them) */
  events: AgentEvent[];
  running: boolean;
  /** Why the stream failed (not a run's own error event) */
  streamError?: string | null;
}

export function ReasoningPanel({ events: all, running, streamError }: PanelProps) {
  const events = all.filter((e) => e.type !== "answer_delta");
  const start = events.length ? events[0].timestamp : 0;
  const terminal = events.find((e) => e.type === "done" || e.type === "error");
  const runError = terminal?.type === "error" ? terminal.message : null;
  return (
    <section className="panel" aria-labelledby="panel-title">
      <h2 id="panel-title">Reasoning</h2>
      <ol className="steps" aria-live="polite" aria-relevant="additions">
        {events.map((e, i) => {
          const kind = kindOf(e);
          const prev = i ? events[i - 1].timestamp : start;
          return (
            <li key={e.seq} className={`step step-${kind}`} data-kind={kind}>
              <div className="step-head">
                <span className="badge">{KIND_LABEL[kind]}</span>
                <span className="timing" title="time since the run started (time of this step)">
                  +{seconds(e.timestamp - start)}
                  {i > 0 && ` (${seconds(Math.max(0, e.timestamp - prev))})`}
                </span>
              </div>
              <Body event={e} />
            </li>
          );
        })}
      </ol>
      {running && !streamError && (
        <p className="running" role="status">
          <span className="spinner" aria-hidden="true" /> Running…
        </p>
      )}
      {!running && terminal?.type === "done" && (
        <p className="finished" role="status">
          Finished in {seconds(terminal.timestamp - start)}: {terminal.status}
        </p>
      )}
      {(streamError || runError) && (
        <div className="error-state" role="alert">
          <strong>{streamError ? "The stream failed" : "The run failed"}</strong>
          <p>{streamError ?? runError}</p>
        </div>
      )}
    </section>
  );
}

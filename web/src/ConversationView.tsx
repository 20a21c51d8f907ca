import { useState } from "react";
import { withCitations } from "./Answer";
import { threadTitle } from "./Conversations";
import type { Citation, ThreadDetail, TurnOut } from "./types";

/** A question of this thread being answered now (not a turn yet). */
export interface PendingTurn {
  question: string;
  /** The follow-up made standalone, once the run said so */
  rewritten: string | null;
}

export interface ConversationViewProps {
  thread: ThreadDetail;
  pending: PendingTurn | null;
  /** A run of this thread is going on: the next question waits for it */
  busy: boolean;
  disabled: boolean;
  error: string | null;
  onAsk: (question: string) => void;
  onCite: (c: Citation) => void;
  onClose: () => void;
}

function citation(sourceId: string): Citation {
  return { source_id: sourceId, number: null, title: "", text: "", support: null };
}

function SearchedAs({ question }: { question: string }) {
  return (
    <p className="searched-as">
      searched as: <q>{question}</q>
    </p>
  );
}

function Turn({ turn, onCite }: { turn: TurnOut; onCite: (c: Citation) => void }) {
  const cited = turn.citations.map(citation);
  return (
    <li className="turn" data-position={turn.position}>
      <p className="turn-question">
        <span className="who">Q{turn.position + 1}</span> {turn.question}
      </p>
      {turn.rewritten_question && <SearchedAs question={turn.rewritten_question} />}
      <div className="turn-answer">
        {turn.answer.split(/\n+/).map((para, i) => (
          <p key={i}>{withCitations(para, cited, onCite)}</p>
        ))}
      </div>
      {cited.length > 0 && (
        <p className="turn-sources">
          <span className="muted">Cited:</span>{" "}
          {cited.map((c) => (
            <button
              key={c.source_id}
              type="button"
              className="cite"
              data-source-id={c.source_id}
              aria-label={`Open cited section ${c.source_id}`}
              onClick={() => onCite(c)}
            >
              [{c.source_id}]
            </button>
          ))}
        </p>
      )}
      {turn.status !== "completed" && <p className="muted turn-status">({turn.status})</p>}
    </li>
  );
}

/** A conversation: its turns (question, the standalone rewrite a follow-up was searched as,
 * the answer and what it cited), the question being answered, and the box for the next. */
export function ConversationView({
  thread,
  pending,
  busy,
  disabled,
  error,
  onAsk,
  onCite,
  onClose,
}: ConversationViewProps) {
  const [draft, setDraft] = useState("");
  const first = thread.turns.length === 0 && !pending;
  const submit = (ev: React.FormEvent) => {
    ev.preventDefault();
    const q = draft.trim();
    if (!q || busy || disabled) return;
    onAsk(q);
    setDraft("");
  };
  return (
    <section className="conversation" aria-labelledby="conversation-title">
      <div className="conversation-head">
        <h2 id="conversation-title">{threadTitle(thread)}</h2>
        <button type="button" className="plain" onClick={onClose}>
          Close conversation
        </button>
      </div>
      <ol className="turns">
        {thread.turns.map((t) => (
          <Turn key={t.position} turn={t} onCite={onCite} />
        ))}
        {pending && (
          <li className="turn pending" aria-busy="true">
            <p className="turn-question">
              <span className="who">Q{thread.turns.length + 1}</span> {pending.question}
            </p>
            {pending.rewritten && <SearchedAs question={pending.rewritten} />}
            <p className="muted">Answering…</p>
          </li>
        )}
      </ol>
      {first && <p className="muted">Ask a first question; follow-ups can lean on it.</p>}
      {error && (
        <p className="error-state" role="alert">
          {error}
        </p>
      )}
      <form className="followup row" onSubmit={submit} aria-label="Ask in this conversation">
        <label htmlFor="followup">{first ? "First question" : "Follow-up question"}</label>
        <input
          id="followup"
          type="text"
          value={draft}
          maxLength={4000}
          autoFocus
          placeholder={first ? "What is the punishment for theft?" : "And if it is attempted?"}
          onChange={(e) => setDraft(e.target.value)}
        />
        <button type="submit" disabled={disabled || busy || !draft.trim()}>
          Send
        </button>
      </form>
    </section>
  );
}

import { useState } from "react";
import type { ThreadOut } from "./types";

export interface ConversationsProps {
  threads: ThreadOut[];
  selected: string | null;
  /** No collection or no key: nothing can be started */
  disabled: boolean;
  error: string | null;
  onNew: () => void;
  onSelect: (t: ThreadOut) => void;
  onDelete: (t: ThreadOut) => void;
}

export function threadTitle(t: ThreadOut): string {
  return t.title || "New conversation";
}

/** The conversation threads of the selected collection: start one, open one, delete one
 * (a second click confirms). */
export function Conversations({
  threads,
  selected,
  disabled,
  error,
  onNew,
  onSelect,
  onDelete,
}: ConversationsProps) {
  const [confirming, setConfirming] = useState<string | null>(null);
  return (
    <details open className="threads">
      <summary>
        <h2 id="threads-title">Conversations</h2>
      </summary>
      <button type="button" className="new-thread" onClick={onNew} disabled={disabled}>
        New conversation
      </button>
      {error && (
        <p className="error-state" role="alert">
          {error}
        </p>
      )}
      {threads.length === 0 && !error && <p className="muted">No conversations yet.</p>}
      <ul aria-labelledby="threads-title">
        {threads.map((t) => (
          <li key={t.thread_id} className="thread-row">
            <button
              type="button"
              className="thread-item"
              aria-current={t.thread_id === selected ? "true" : undefined}
              onClick={() => onSelect(t)}
            >
              <span className="run-query">{threadTitle(t)}</span>
              <span className="muted">
                {t.turn_count} {t.turn_count === 1 ? "turn" : "turns"}
              </span>
            </button>
            {confirming === t.thread_id ? (
              <span className="confirm">
                <button
                  type="button"
                  className="danger"
                  onClick={() => {
                    setConfirming(null);
                    onDelete(t);
                  }}
                >
                  Delete
                </button>
                <button type="button" className="plain" onClick={() => setConfirming(null)}>
                  Keep
                </button>
              </span>
            ) : (
              <button
                type="button"
                className="plain delete-thread"
                aria-label={`Delete the conversation ${threadTitle(t)}`}
                title="Delete"
                onClick={() => setConfirming(t.thread_id)}
              >
                ×
              </button>
            )}
          </li>
        ))}
      </ul>
    </details>
  );
}

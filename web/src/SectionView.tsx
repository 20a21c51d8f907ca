import { useEffect, useRef } from "react";
import type { Citation, SectionOut } from "./types";

export interface SectionViewProps {
  citation: Citation;
  section: SectionOut | null;
  loading: boolean;
  error: string | null;
  onOpen: (sourceId: string) => void;
  onClose: () => void;
}

/** The cited section's text and its place in its document's outline (a dialog). */
export function SectionView({ citation, section, loading, error, onOpen, onClose }: SectionViewProps) {
  const closeRef = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    closeRef.current?.focus();
    const onKey = (e: KeyboardEvent) => e.key === "Escape" && onClose();
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [onClose]);
  const id = section?.source_id ?? citation.source_id;
  return (
    <div className="overlay" onClick={onClose}>
      <div
        className="section-view"
        role="dialog"
        aria-modal="true"
        aria-labelledby="section-title"
        onClick={(e) => e.stopPropagation()}
      >
        <div className="section-head">
          <h2 id="section-title">
            <code>{id}</code> {section?.title ?? citation.title}
          </h2>
          <button type="button" ref={closeRef} onClick={onClose} aria-label="Close the section">
            Close
          </button>
        </div>
        {loading && <p role="status">Loading the section…</p>}
        {error && (
          <p className="muted" role="note">
            Could not load the whole section ({error}); the cited text is shown.
          </p>
        )}
        <div className="section-body">
          <pre className="section-text" data-testid="section-text">
            {section?.text ?? citation.text}
          </pre>
          {section && (
            <nav className="outline" aria-label="Place in the document's outline">
              <h3>
                Outline of {section.doc_id}{" "}
                <span className="muted">
                  ({section.outline_start + 1}–{section.outline_start + section.outline.length} of{" "}
                  {section.outline_total})
                </span>
              </h3>
              <ol start={section.outline_start + 1}>
                {section.outline.map((o) => (
                  <li key={o.source_id}>
                    {o.source_id === section.source_id ? (
                      <strong aria-current="true">{o.title || o.source_id}</strong>
                    ) : (
                      <button type="button" className="link" onClick={() => onOpen(o.source_id)}>
                        {o.title || o.source_id}
                      </button>
                    )}
                  </li>
                ))}
              </ol>
            </nav>
          )}
        </div>
      </div>
    </div>
  );
}

import { cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Answer } from "./Answer";
import type { GeneratedAnswer } from "./types";

afterEach(cleanup);

const CITATION = {
  source_id: "BNS_S103",
  number: 1,
  title: "BNS > Section 103. Punishment for murder.",
  text: "Whoever commits murder shall be punished with death…",
  support: 0.82,
};

describe("Answer", () => {
  it("turns citation markers into buttons that open the cited section", () => {
    const onCite = vi.fn();
    const answer: GeneratedAnswer = {
      answer_text: "Death or imprisonment for life [BNS_S103]. Unknown [X_1] stays text.",
      key_points: [],
      citations: [CITATION],
      is_insufficient_context: false,
      ungrounded_sentences: [],
    };
    const { container } = render(<Answer answer={answer} onCite={onCite} />);
    const markers = container.querySelectorAll('.answer-text button[data-source-id="BNS_S103"]');
    expect(markers.length).toBe(1);
    fireEvent.click(markers[0]);
    expect(onCite).toHaveBeenCalledWith(CITATION);
    expect(container.textContent).toContain("Unknown [X_1] stays text.");
    expect(screen.queryByText(/Insufficient context/)).toBeNull();
  });

  it("shows an insufficient-context answer as such", () => {
    const answer: GeneratedAnswer = {
      answer_text: "The documents do not say.",
      key_points: [],
      citations: [],
      is_insufficient_context: true,
      ungrounded_sentences: [],
    };
    render(<Answer answer={answer} onCite={() => undefined} />);
    expect(screen.getByRole("note").textContent).toMatch(/Insufficient context/);
  });
});

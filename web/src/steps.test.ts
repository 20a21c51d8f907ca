import { describe, expect, it } from "vitest";
import { seconds } from "./steps";

describe("seconds", () => {
  it("shows milliseconds for sub-second steps, so a fast run does not read +0.0 s", () => {
    expect(seconds(0.0372)).toBe("37 ms");
    expect(seconds(0)).toBe("0 ms");
    expect(seconds(2.44)).toBe("2.4 s");
    expect(seconds(41.2)).toBe("41 s");
  });
});

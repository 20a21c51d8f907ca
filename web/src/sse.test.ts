import { describe, expect, it } from "vitest";
import { SseParser } from "./sse";

describe("SseParser", () => {
  it("splits a stream cut at any point into messages, skipping pings", () => {
    const text = 'id: 1\nevent: think\ndata: {"a":1}\n\n: ping\n\nid: 2\r\nevent: done\r\ndata: x\r\n\r\n';
    for (let cut = 0; cut < text.length; cut++) {
      const p = new SseParser();
      const got = [...p.feed(text.slice(0, cut)), ...p.feed(text.slice(cut))];
      expect(got).toEqual([
        { id: "1", event: "think", data: '{"a":1}' },
        { id: "2", event: "done", data: "x" },
      ]);
    }
  });
});

// A Server-Sent Events reader over fetch (EventSource cannot send an Authorization header).

export interface SseMessage {
  id: string | null;
  event: string;
  data: string;
}

/** Splits a text/event-stream into messages; feed it chunks, it returns complete messages. */
export class SseParser {
  private buffer = "";
  private data: string[] = [];
  private event = "";
  private id: string | null = null;

  feed(chunk: string): SseMessage[] {
    this.buffer += chunk;
    const out: SseMessage[] = [];
    let nl: number;
    while ((nl = this.buffer.search(/\r\n|\r|\n/)) >= 0) {
      if (this.buffer[nl] === "\r" && nl === this.buffer.length - 1) break; // \r\n cut?
      const line = this.buffer.slice(0, nl);
      const sep = this.buffer.startsWith("\r\n", nl) ? 2 : 1;
      this.buffer = this.buffer.slice(nl + sep);
      if (line === "") {
        if (this.data.length) {
          out.push({ id: this.id, event: this.event || "message", data: this.data.join("\n") });
        }
        this.data = [];
        this.event = "";
        continue;
      }
      if (line.startsWith(":")) continue; // comment (keep-alive ping)
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") this.data.push(value);
      else if (field === "event") this.event = value;
      else if (field === "id") this.id = value;
    }
    return out;
  }
}

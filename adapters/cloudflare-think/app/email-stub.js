// The internal module `cloudflare:email` imports (`agents` imports that).
// Miniflare supplies it as an extension; plain workerd has none, so the
// workerd config embeds this one, of the same shape.
class EmailMessage {
  constructor(from, to, raw) {
    this.from = from;
    this.to = to;
    this.raw = raw;
  }
}
export default { EmailMessage };

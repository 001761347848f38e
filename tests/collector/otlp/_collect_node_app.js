// A Node.js app for the README's CI recipe (`evaltrace collect ... -- node app.js`): it exports its
// spans as OTLP/JSON over HTTP to wherever the OTel variables collect sets say (no SDK: only
// Node's own http module), waits for the answer, and exits 0, or 1 if the export was refused.
const http = require("http");
const crypto = require("crypto");

const endpoint = process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
const protocol = process.env.OTEL_EXPORTER_OTLP_PROTOCOL;
if (!endpoint || !protocol.startsWith("http/")) {
  console.error(`no OTLP/HTTP endpoint given (${endpoint}, ${protocol})`);
  process.exit(1);
}
const traceId = crypto.randomBytes(16).toString("hex");
const now = BigInt(Date.now()) * 1000000n;
const spans = [];
for (let n = 0; n < 25; n++) {
  spans.push({
    traceId,
    spanId: crypto.randomBytes(8).toString("hex"),
    name: `node span ${n}`,
    kind: 1,
    startTimeUnixNano: String(now + BigInt(n)),
    endTimeUnixNano: String(now + BigInt(n) + 1000n),
  });
}
const str = (key, value) => ({ key, value: { stringValue: value } });
const body = JSON.stringify({
  resourceSpans: [
    {
      resource: { attributes: [str("service.name", "node-app"), str("telemetry.sdk.language", "nodejs")] },
      scopeSpans: [{ scope: { name: "node-app" }, spans }],
    },
  ],
});
const request = http.request(
  `${endpoint}/v1/traces`,
  { method: "POST", headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) } },
  (response) => {
    response.resume();
    response.on("end", () => process.exit(response.statusCode === 200 ? 0 : 1));
  },
);
request.on("error", (error) => {
  console.error(error.message);
  process.exit(1);
});
request.end(body);

// What an integrator does with the generated TypeScript client (openapi-fetch over the types
// scripts/generate-typescript-client.mjs wrote to schema.d.ts): log in, create a key, upload bytes with the key, download
// them back, list the files, and read refusals as the typed error envelope. It prints what it got
// as one JSON object; tests/system/test_generated_clients.py checks it. tsc checks this file
// against the generated types before it runs, so a document generators mistype fails there.
//
//   node flow.js <service root URL> <email> <password>
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type ErrorEnvelope = components["schemas"]["ErrorEnvelope"];

const [baseUrl, email, password] = process.argv.slice(2);
if (!baseUrl || !email || !password) {
  throw new Error("usage: node flow.js <service root URL> <email> <password>");
}

// Every byte value, then every one again in reverse: bytes that are not UTF-8, NUL, CR and LF.
const payload = new Uint8Array(512);
for (let i = 0; i < 256; i++) {
  payload[i] = i;
  payload[511 - i] = i;
}

function refusal(error: ErrorEnvelope | undefined, response: Response): object {
  if (error === undefined) {
    throw new Error(`expected a refusal, got ${response.status}`);
  }
  // Typed: a string code and message, never `any`.
  const code: string = error.error.code;
  const message: string = error.error.message;
  return { status: response.status, code, message };
}

function succeeded<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.data === undefined) {
    throw new Error(`${result.response.status}: ${JSON.stringify(result.error)}`);
  }
  return result.data;
}

const client = createClient<paths>({ baseUrl });

const login = succeeded(
  await client.POST("/api/v1/auth/login", { body: { email, password } }),
);
// A login answers a session, or, for an account with a second factor, that one is required:
// this account has none.
if (!("token" in login.data)) {
  throw new Error("the login asked for a second factor");
}
const session = { Authorization: `Bearer ${login.data.token}` };

const created = succeeded(
  await client.POST("/api/v1/keys", {
    headers: session,
    body: { name: "typescript client", permissions: ["files.read", "files.write"], expires_days: 1 },
  }),
);
const keyed = createClient<paths>({ baseUrl, headers: { "X-API-Key": created.data.secret_key } });

const uploaded = succeeded(
  await keyed.POST("/api/v1/files", {
    body: { file: new Blob([payload], { type: "application/octet-stream" }) },
    // The part needs a file name, which a Blob has not: FormData gives it one.
    bodySerializer(body) {
      const form = new FormData();
      form.append("file", body.file, "every-byte.bin");
      return form;
    },
  }),
);

const downloaded = succeeded(
  await keyed.GET("/api/v1/files/{file_id}/content", {
    params: { path: { file_id: uploaded.data.id } },
    parseAs: "arrayBuffer",
  }),
);

const listed = succeeded(await keyed.GET("/api/v1/files", { params: { query: { limit: 10 } } }));
const listedIds: string[] = listed.data.files.map((file) => file.id);

const missing = await keyed.GET("/api/v1/files/{file_id}", {
  params: { path: { file_id: `fil_${"0".repeat(22)}` } },
});
const anonymous = await client.GET("/api/v1/files");

console.log(
  JSON.stringify({
    uploaded: {
      id: uploaded.data.id,
      size: uploaded.data.size,
      sha256: uploaded.data.sha256,
      content_type: uploaded.data.content_type,
      name: uploaded.data.name,
      sent_base64: Buffer.from(payload).toString("base64"),
    },
    downloaded_base64: Buffer.from(downloaded).toString("base64"),
    listed_ids: listedIds,
    not_found: refusal(missing.error, missing.response),
    unauthenticated: refusal(anonymous.error, anonymous.response),
  }),
);

// Never called: tsc refuses each marked line, which proves the generated types are precise
// rather than `any` (an unused @ts-expect-error is itself an error).
export async function typesRefuseWhatTheServiceRefuses(): Promise<void> {
  // @ts-expect-error: a permission the service does not define
  await client.POST("/api/v1/keys", { body: { name: "x", permissions: ["files.admin"], expires_days: 1 } });
  // @ts-expect-error: an upload's part is a Blob, not text
  await keyed.POST("/api/v1/files", { body: { file: "File(payload=...)" } });
  // @ts-expect-error: a path the API does not have
  await keyed.GET("/api/v1/file");
}

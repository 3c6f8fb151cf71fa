// tus-js-client uploading a file to the service as an integrator's Node program would, in two
// goes: the first stops after its first chunk (the connection "dropped"), the second finds the
// upload it left (in the URL storage, by the file's fingerprint), asks where it is and sends
// the rest. Prints one JSON line: where the second go started, the file the upload became.
//
//   node upload.mjs ENDPOINT API_KEY FILE CHUNK_BYTES STORAGE_JSON [RESUME_ORIGIN]
//
// RESUME_ORIGIN: another instance's origin, for the second go to continue the upload there.
import { readFile } from "node:fs/promises";
import { FileUrlStorage, Upload } from "tus-js-client";

const [endpoint, apiKey, path, chunkBytes, storagePath, resumeOrigin] = process.argv.slice(2);
const data = await readFile(path);
const urlStorage = new FileUrlStorage(storagePath);

function options(extra) {
  return {
    endpoint,
    chunkSize: Number(chunkBytes),
    headers: { "X-API-Key": apiKey },
    metadata: { filename: "from-node.bin", filetype: "application/octet-stream" },
    urlStorage,
    fingerprint: async () => `tus-js-client:${path}:${data.length}`,
    retryDelays: [100, 500],
    ...extra,
  };
}

// The first go: one chunk, then abort, as a connection dropped between chunks.
await new Promise((resolve, reject) => {
  const upload = new Upload(
    data,
    options({
      onChunkComplete: () => {
        upload.abort().then(resolve, reject);
      },
      onError: reject,
      onSuccess: () => reject(new Error("finished in one chunk: make the file larger")),
    }),
  );
  upload.start();
});

// The second go: the upload the storage names, from where the service says it is.
const outcome = await new Promise((resolve, reject) => {
  let resumedAt = null;
  let fileId = null;
  const upload = new Upload(
    data,
    options({
      onAfterResponse: (request, response) => {
        if (request.getMethod() === "HEAD" && resumedAt === null) {
          resumedAt = Number(response.getHeader("Upload-Offset"));
        }
        fileId = response.getHeader("Filehost-File-Id") || fileId;
      },
      onError: reject,
      onSuccess: () => resolve({ resumedAt, fileId, url: upload.url }),
    }),
  );
  upload.findPreviousUploads().then((previous) => {
    if (previous.length !== 1) {
      reject(new Error(`expected one previous upload, found ${previous.length}`));
      return;
    }
    const [found] = previous;
    if (resumeOrigin) {
      found.uploadUrl = resumeOrigin + new URL(found.uploadUrl).pathname;
    }
    upload.resumeFromPreviousUpload(found);
    upload.start();
  }, reject);
});
console.log(JSON.stringify(outcome));
